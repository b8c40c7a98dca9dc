"""The only package that talks to apiservers.

- ``client``: ApiClient (one apiserver, plain-dict objects): its verbs
- ``requesting``: how a request travels (the two paths, the 401 retry, the write
  fence, request records, outages); ``connecting``: from a kubeconfig to a
  connection; ``transport``: the bytes on the wire
- ``resources``: the resources jobrelay uses besides its kinds, and their URLs
- ``errors``: ApiError and what a request can end in; ``streams``: watch and log streams
- ``watching``: Informer, the list+watch cache of one kind
- ``queueing``: WorkQueue and run_workers, client-go style
- ``events``: EventRecorder, deduplicated core/v1 Events
- ``election``: leader election (``rules``, pure; ``elector``, its I/O)
- ``probes``: health probes of control-plane endpoints
"""
