"""The controller's logs/mirror API, one feature in one package.

A manager user reads a dispatched workload's pod logs (``/v1/namespaces/NS/jobs/NAME/logs``)
and its mirror and pods (``.../mirror``) on the worker, with only their management-cluster
credentials: the controller authenticates and authorises them on the manager, then reads
from the worker with its own credentials.

- ``rules``: pure: routes and paths, query parsing, identities, review bodies, which mirror
  and pods a request reads (by UID), refusals as ``Status`` bodies, the published ConfigMap
- ``stream_rules``: pure: the bounded line splitter, a follow's rate budget, the count of
  open pod streams per user, per worker and overall
- ``settings``: pure: ``ApiSettings`` (the ``--api-*`` flags of ``jobrelay run``)
- ``handler``: ``RelayApi``: authenticate, authorise, read the mirror's pods and logs
- ``logstreams``: a pod's log followed until it ends (one pod watch a request), several
  merged, the byte cap, a follow's byte and rate bounds
- ``httpserver``: the HTTPS server (h11, chunked streams, client certificates)
- ``publishing``: serving it (certificate, client CA, URL) and the ConfigMap ``jobrelay-api``
- ``client``: the user's side (`jobrelay logs`, `describe`): find the API, send the
  user's own credentials

Nothing is imported here, so that ``jobrelay --help`` pays for none of it.
"""
