"""The local fleet's stand-in for cluster-autoscaler with ProvisioningRequests: on one
worker, it answers each request by adding KWOK nodes of a set shape after a set delay, up
to a maximum, or refuses (``scaleup_rules``: what to do; ``scaleup_driver``: doing it).
``python -m jobrelay.localfleet.autoscaler --help`` lists its flags."""
