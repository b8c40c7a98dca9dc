"""The decision's rule modules, one per step of decide.py's pipeline. Pure.

deletion_step, conflict_step, hold_step (the hold rules in holds/), placing_step,
move_step, mirror_step, status_step; what they share: step_types (what a step
answers), facts (what they read off objects), plan_parts (actions built one way),
status_writes, placement_search, moving, mirror_creation.
"""
