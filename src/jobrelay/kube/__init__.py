"""The only package that talks to apiservers.

- ``api``: ApiClient (one apiserver, plain-dict objects), Resource descriptors, ApiError
- ``watching``: Informer, the list+watch cache of one kind
- ``queueing``: WorkQueue and run_workers, client-go style
- ``events``: EventRecorder, deduplicated core/v1 Events
"""
