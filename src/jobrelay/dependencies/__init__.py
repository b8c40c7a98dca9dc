"""What a workload's pods need outside themselves, and jobrelay's copies of it. Pure.

``template_references.py``: the ConfigMaps, Secrets, the ServiceAccount and the
PersistentVolumeClaims its pod templates name; ``copy_rules.py``: what a copy of
one carries on a worker, its digest, what is never copied, the copy's marks.
"""
