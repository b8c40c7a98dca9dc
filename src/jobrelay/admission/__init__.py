"""Fleet-wide queues (RelayQueue): quotas, weighted dominant-resource fair share,
priority and preemption over the fleet's real capacity. Pure: functions of a snapshot
(``model.py``); the controller feeds them and applies what they decide."""
