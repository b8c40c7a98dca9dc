"""A worker-side stand-in for the ecosystem's operators (KubeRay, Kubeflow Trainer, the
training operator, the MPI operator), for the local fleet, whose KWOK nodes cannot run
their pods: it drives each object of their kinds through the lifecycle the real operator
writes (created, running, succeeded or failed, suspended and resumed; a RayCluster
becomes ready and stays), with their status fields, condition types, reasons and messages,
through the /status subresource, so that the real CRDs judge every write.

It acts only on objects whose managedBy is absent or the operator's own value, as the real
operators do (a mirror on a worker has none); how a run ends and how long it takes are read
from the object's annotations (``rules.OUTCOME_ANNOTATION``, ``rules.RUN_SECONDS_ANNOTATION``).
The decisions are pure (``lifecycle_rules``, ``ray_rules``, ``kubeflow_rules``, ``rules``);
``driver`` watches and writes; ``python -m jobrelay.localfleet.standin`` runs it.
"""
