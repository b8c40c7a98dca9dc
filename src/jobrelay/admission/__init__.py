"""Fleet-wide queues (RelayQueue) and the manager's ResourceQuotas, pure: which held
workload is admitted next, why the others wait and where, whom to preempt, each queue's
figures. ``planner.plan(view) -> AdmissionPlan`` is the pass; ``verdicts.queue_verdict``
a reconcile's answer from the last plan; ``queue_places`` the positions `jobrelay get`
shows. The controller runs them (controller/relay/queue_admission.py) and keeps the plan
in its memory; nothing here does I/O (an import-linter contract)."""
