"""Properties of admission over many passes: ceilings hold, no queue starves, shares follow
the weights under saturation."""

from __future__ import annotations

import dataclasses
import heapq
import random

from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.unit.admission.support import entry, fleet, queue, queues

from jobrelay.admission.fair_order import admission_pass, queue_order, quota_excess
from jobrelay.admission.namespace_quota import read_hard
from jobrelay.admission.queue_model import Entry, QueueSpec
from jobrelay.admission.shares import usage_by_queue

FLEET_CPU = 32


class Pool:
    """One pool of free CPU (milli-cores) that fits checks take from."""

    def __init__(self, free: int) -> None:
        self.free = free

    def fits(self, candidate: Entry) -> bool:
        asked = candidate.requests.get("cpu", 0)
        if asked > self.free:
            return False
        self.free -= asked
        return True


queue_specs = st.lists(
    st.tuples(
        st.sampled_from([0.5, 1.0, 2.0, 3.0]),
        st.none() | st.integers(1, 12),  # nominal cpu
        st.none() | st.integers(0, 8),  # borrowing limit cpu
        st.booleans(),  # StrictFIFO
    ),
    min_size=1,
    max_size=5,
)


def build(specs: list) -> dict[str, QueueSpec]:
    return queues(
        *(
            queue(
                f"q{i}",
                weight=weight,
                nominal={} if nominal is None else {"cpu": str(nominal)},
                borrowing={} if borrowing is None else {"cpu": str(borrowing)},
                strict=strict,
            )
            for i, (weight, nominal, borrowing, strict) in enumerate(specs)
        )
    )


@settings(max_examples=200, deadline=None)
@given(queue_specs, st.lists(st.tuples(st.integers(0, 4), st.integers(1, 6), st.booleans()),
                             max_size=60), st.integers(0, FLEET_CPU))  # fmt: skip
def test_a_pass_never_breaks_a_ceiling_and_leaves_no_fitting_work(
    specs: list, raw: list, free_cpu: int
) -> None:
    known = build(specs)
    entries = [
        entry(f"e{n}", f"q{q % len(known)}", cpu=str(cpu), created=n, admitted=running)
        for n, (q, cpu, running) in enumerate(raw)
    ]
    before = usage_by_queue(entries)
    pool = Pool(free_cpu * 1000)
    result = admission_pass(known, entries, fleet(str(FLEET_CPU)), fits=pool.fits)
    by_key = {e.key: e for e in entries}
    after = usage_by_queue(
        dataclasses.replace(e, admitted=e.admitted or e.key in result.admitted) for e in entries
    )
    for name, spec in known.items():
        ceiling = spec.ceiling("cpu")
        grew = after.get(name, {}).get("cpu", 0) > before.get(name, {}).get("cpu", 0)
        if ceiling is not None and grew:
            assert after[name]["cpu"] <= ceiling, name
    # Every pending entry is admitted or told why it waits, with a position.
    pending = {e.key for e in entries if not e.admitted}
    assert set(result.admitted) | set(result.holding) == pending
    assert set(result.positions) == pending - set(result.admitted)
    # A StrictFIFO queue admits a prefix of its order: never one behind a held one.
    for name, spec in known.items():
        if spec.strategy.value == "StrictFIFO":
            line = sorted((e for e in entries if e.queue == name and not e.admitted),
                          key=queue_order)  # fmt: skip
            taken = [e.key in result.admitted for e in line]
            assert taken == sorted(taken, reverse=True), name
    # Work-conserving: no BestEffortFIFO queue keeps an entry its quota and the room
    # left would take (that would starve it for nothing).
    for key in pending - set(result.admitted):
        held = by_key[key]
        spec = known[held.queue]
        if spec.strategy.value == "BestEffortFIFO":
            within = quota_excess(spec, after.get(held.queue, {}), held.requests) is None
            assert not (within and held.requests["cpu"] <= pool.free), key


@settings(max_examples=200, deadline=None)
@given(queue_specs, st.lists(st.tuples(st.integers(0, 4), st.integers(1, 3), st.booleans(),
                                       st.integers(0, 2)), max_size=60),
       st.integers(0, FLEET_CPU), st.booleans())  # fmt: skip
# One of another namespace, asking the same, right behind a held one: its quota decides.
@example([(1.0, None, None, False)], [(0, 2, True, 0), (0, 2, False, 1), (0, 2, False, 0)], 0,
         True)  # fmt: skip
def test_holding_alike_runs_unjudged_decides_as_judging_each(
    specs: list, raw: list, free_cpu: int, quotas: bool
) -> None:
    known = build(specs)
    # The pool's fit reads only the CPU asked: that is each entry's likeness.
    entries = [
        entry(f"e{n:02d}", f"q{q % len(known)}", cpu=str(cpu), created=n, admitted=running,
              namespace=f"ns{space}", likeness=str(cpu))
        for n, (q, cpu, running, space) in enumerate(raw)
    ]  # fmt: skip
    limits = {"ns0": read_hard({"requests.cpu": "2"})} if quotas else None
    judged, skipping = Pool(free_cpu * 1000), Pool(free_cpu * 1000)
    each = admission_pass(known, entries, fleet(str(FLEET_CPU)), fits=judged.fits,
                          namespace_quotas=limits)  # fmt: skip
    runs = admission_pass(known, entries, fleet(str(FLEET_CPU)), fits=skipping.fits,
                          namespace_quotas=limits, alike=lambda _held: True)  # fmt: skip
    assert runs == each


def simulate(
    known: dict[str, QueueSpec],
    sizes: dict[str, list[int]],
    seed: int,
    *,
    completions: int,
    top_up: bool,
) -> tuple[dict[str, float], set[str], list[str]]:
    """Runs passes after each completion. Returns each queue's CPU-seconds over the
    saturated period (from the first completion on), the keys admitted, and the keys
    still pending at the end."""
    rng = random.Random(seed)
    counter = 0
    entries: dict[str, Entry] = {}

    def submit(name: str, cpu: int) -> None:
        nonlocal counter
        made = entry(f"e{counter}", name, cpu=str(cpu), created=counter)
        entries[made.key] = made
        counter += 1

    for name, cpus in sizes.items():
        for cpu in cpus:
            submit(name, cpu)
    running: list[tuple[float, str]] = []
    cpu_time = dict.fromkeys(known, 0.0)
    admitted_ever: set[str] = set()
    now = 0.0
    done = 0
    while True:
        used = sum(e.requests["cpu"] for e in entries.values() if e.admitted)
        pool = Pool(FLEET_CPU * 1000 - used)
        result = admission_pass(known, entries.values(), fleet(str(FLEET_CPU)), fits=pool.fits)
        for key in result.admitted:
            entries[key] = dataclasses.replace(entries[key], admitted=True)
            admitted_ever.add(key)
            heapq.heappush(running, (now + rng.uniform(10, 30), key))
        if not running or done >= completions:
            break
        ended, key = heapq.heappop(running)
        if done > 0:
            for other in entries.values():
                if other.admitted:
                    cpu_time[other.queue] += (ended - now) * other.requests["cpu"] / 1000
        now = ended
        finished = entries.pop(key)
        done += 1
        if top_up:
            submit(finished.queue, finished.requests["cpu"] // 1000)
    pending = [key for key, e in entries.items() if not e.admitted]
    return cpu_time, admitted_ever, pending


def test_weights_1_1_2_share_a_saturated_fleet_25_25_50() -> None:
    known = queues(queue("a"), queue("b"), queue("c", weight=2))
    cpu_time, _, _ = simulate(known, {n: [1] * 60 for n in known}, 7, completions=600, top_up=True)
    total = sum(cpu_time.values())
    for name, expected in {"a": 0.25, "b": 0.25, "c": 0.5}.items():
        assert abs(cpu_time[name] / total - expected) < 0.03, cpu_time


@settings(max_examples=8, deadline=None)
@given(st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=2, max_size=4), st.integers(0, 2**32))
@example(weights=[1.0, 1.0, 3.0], seed=0)  # ties on the share after: c took too little
@example(weights=[3.0, 1.0, 1.0, 2.0], seed=0)  # ties broken by name: q0 took too much
def test_under_saturation_shares_converge_to_the_weights(weights: list, seed: int) -> None:
    known = queues(*(queue(f"q{i}", weight=w) for i, w in enumerate(weights)))
    sizes = {name: [1] * 40 for name in known}
    cpu_time, _, _ = simulate(known, sizes, seed, completions=500, top_up=True)
    total = sum(cpu_time.values())
    for name, spec in known.items():
        expected = spec.weight / sum(weights)
        # Whole 1-CPU workloads: a queue may hold one CPU more or less than its exact
        # part (1:1:3 of 32 CPUs is 6.4 / 6.4 / 19.2), so one CPU of the fleet is allowed.
        assert abs(cpu_time[name] / total - expected) < 1 / FLEET_CPU + 0.005, (weights, cpu_time)


@settings(max_examples=60, deadline=None)
@given(queue_specs, st.lists(st.tuples(st.integers(0, 4), st.integers(1, 8)), max_size=80),
       st.integers(0, 2**32))  # fmt: skip
def test_no_queue_with_weight_and_fitting_demand_starves(specs: list, raw: list, seed: int) -> None:
    known = build(specs)
    sizes: dict[str, list[int]] = {name: [] for name in known}
    for q, cpu in raw:
        name = f"q{q % len(known)}"
        ceiling = known[name].ceiling("cpu")
        if ceiling is None or cpu * 1000 <= ceiling:  # it fits its quota, alone at least
            sizes[name].append(cpu)
    _, admitted, pending = simulate(known, sizes, seed, completions=10**6, top_up=False)
    assert pending == []
    assert len(admitted) == sum(len(cpus) for cpus in sizes.values())


@settings(max_examples=200, deadline=None)
@given(queue_specs, st.lists(st.tuples(st.integers(0, 4), st.integers(1, 6), st.integers(0, 2)),
                             max_size=60), st.lists(st.integers(0, 12), min_size=3, max_size=3))  # fmt: skip
def test_a_pass_never_breaks_a_namespace_quota(specs: list, raw: list, hard: list) -> None:
    known = build(specs)
    entries = [
        entry(f"e{n}", f"q{q % len(known)}", cpu=str(cpu), created=n, namespace=f"ns{space}")
        for n, (q, cpu, space) in enumerate(raw)
    ]
    limits = {f"ns{i}": read_hard({"requests.cpu": str(cpu)}) for i, cpu in enumerate(hard)}
    result = admission_pass(known, entries, fleet("64"), fits=Pool(64_000).fits,
                            namespace_quotas=limits)  # fmt: skip
    chosen = set(result.admitted)
    for i, cpu in enumerate(hard):
        used = sum(
            e.requests["cpu"] for e in entries if e.key in chosen and e.namespace == f"ns{i}"
        )
        assert used <= cpu * 1000
