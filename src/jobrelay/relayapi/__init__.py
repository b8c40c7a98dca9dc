"""The controller's aggregated API (api.jobrelay.dev/v1alpha1), one feature in one package.

A manager user reads a dispatched workload's pod logs
(``/apis/api.jobrelay.dev/v1alpha1/namespaces/NS/jobs/NAME/log``) and its mirror and pods
(``.../mirror``) on the worker through the manager's apiserver, which authenticates them
and forwards with its front-proxy certificate: the controller trusts only that, authorises
the user on the manager, then reads from the worker with its own credentials.

- ``rules``: pure: routes and paths, discovery, query parsing, review bodies, which mirror
  and pods a request reads (by UID), refusals as ``Status`` bodies
- ``trust_rules``: pure: the front proxy (``requestheader-*``) and the user it forwards
- ``registration_rules``: pure: the APIService, and ``--api-register``'s Service and
  EndpointSlice
- ``managedby_webhook_rules``: pure: the managedBy defaulting webhook (the patch, the
  AdmissionReview answer, the MutatingWebhookConfiguration ``--api-register`` writes)
- ``stream_rules``: pure: the bounded line splitter, a follow's rate budget, the count of
  open pod streams per user, per worker and overall
- ``settings``: pure: ``ApiSettings`` (the ``--api-*`` flags of ``jobrelay run``)
- ``handler``: ``RelayApi``: trust, authorise, discovery, read the mirror's pods and logs
- ``logstreams``: a pod's log followed until it ends (one pod watch a request), several
  merged, the byte cap, a follow's byte and rate bounds
- ``httpserver``: the HTTPS server (h11, chunked streams, client certificates)
- ``trust``: the front proxy kept current by an informer; the TLS context it switches to
- ``serving``: serving it (certificate) and ``--api-register``'s writes
- ``client``: the user's side (`jobrelay logs`, `describe`), through the manager's apiserver

Nothing is imported here, so that ``jobrelay --help`` pays for none of it.
"""
