"""The job stand-in of light workers (`fleet up --light`): one process that plays, for
every light worker, the built-in Job controller, the scheduler, the kubelets and the
garbage collector for batch/v1 Jobs (pod_rules.py, job_rules.py: pure; job_driver.py:
the I/O). See docs/local-fleet.md for what it does and does not do."""
