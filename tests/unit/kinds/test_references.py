"""The reference walk: every place a pod spec names a ConfigMap, a Secret, a ServiceAccount
or a PersistentVolumeClaim (k8s.io/api core/v1 PodSpec; Kubernetes' own walk is
``VisitPodSecretNames`` / ``VisitPodConfigmapNames`` in pkg/api/v1/pod/util.go), and
nothing else ever named."""

from __future__ import annotations

from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.dependencies.template_references import Dependency, claim_names, dependencies
from jobrelay.vocabulary.json_types import JsonObj


def _template(spec: Any) -> JsonObj:
    return {"metadata": {"labels": {"app": "x"}}, "spec": spec}


def _volume(source: str, body: Any) -> JsonObj:
    return {"name": "v", source: body}


def _container(**fields: Any) -> JsonObj:
    return {"name": "main", "image": "busybox", **fields}


CM: Final = "configmap"
SECRET: Final = "secret"
SA: Final = "serviceaccount"

# (case, pod spec, what it names)
PLACES: list[tuple[str, JsonObj, tuple[Dependency, ...]]] = [
    (
        "volume configMap",
        {"volumes": [_volume("configMap", {"name": "settings"})]},
        (Dependency(CM, "settings"),),
    ),
    (
        "volume secret",
        {"volumes": [_volume("secret", {"secretName": "creds"})]},
        (Dependency(SECRET, "creds"),),
    ),
    (
        "projected configMap and secret",
        {
            "volumes": [
                _volume(
                    "projected",
                    {
                        "sources": [
                            {"configMap": {"name": "p-map"}},
                            {"secret": {"name": "p-secret"}},
                            {"serviceAccountToken": {"path": "token"}},
                            {"downwardAPI": {"items": []}},
                        ]
                    },
                )
            ]
        },
        (Dependency(CM, "p-map"), Dependency(SECRET, "p-secret")),
    ),
    (
        "csi nodePublishSecretRef",
        {"volumes": [_volume("csi", {"driver": "d", "nodePublishSecretRef": {"name": "csi-s"}})]},
        (Dependency(SECRET, "csi-s"),),
    ),
    *[
        (
            f"{driver} secretRef",
            {"volumes": [_volume(driver, {"secretRef": {"name": f"{driver.lower()}-s"}})]},
            (Dependency(SECRET, f"{driver.lower()}-s"),),
        )
        for driver in ("cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos")
    ],
    (
        "azureFile secretName",
        {"volumes": [_volume("azureFile", {"secretName": "az", "shareName": "s"})]},
        (Dependency(SECRET, "az"),),
    ),
    *[
        (
            f"{field} envFrom configMapRef and secretRef",
            {
                field: [
                    _container(
                        envFrom=[
                            {"configMapRef": {"name": f"{field}-map"}},
                            {"secretRef": {"name": f"{field}-secret"}, "prefix": "S_"},
                        ]
                    )
                ]
            },
            (Dependency(CM, f"{field}-map"), Dependency(SECRET, f"{field}-secret")),
        )
        for field in ("containers", "initContainers", "ephemeralContainers")
    ],
    *[
        (
            f"{field} env valueFrom configMapKeyRef and secretKeyRef",
            {
                field: [
                    _container(
                        env=[
                            {"name": "A", "value": "literal"},
                            {
                                "name": "B",
                                "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}},
                            },
                            {"name": "C", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                            {
                                "name": "D",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                            },
                        ]
                    )
                ]
            },
            (Dependency(CM, "m"), Dependency(SECRET, "s")),
        )
        for field in ("containers", "initContainers", "ephemeralContainers")
    ],
    (
        "imagePullSecrets",
        {"imagePullSecrets": [{"name": "registry"}, {"name": "mirror"}]},
        (Dependency(SECRET, "mirror", True), Dependency(SECRET, "registry", True)),
    ),
    ("serviceAccountName", {"serviceAccountName": "runner"}, (Dependency(SA, "runner"),)),
    ("deprecated serviceAccount", {"serviceAccount": "old"}, (Dependency(SA, "old"),)),
    (
        "serviceAccountName wins over serviceAccount",
        {"serviceAccountName": "new", "serviceAccount": "old"},
        (Dependency(SA, "new"),),
    ),
    # Named by the pod spec but not outside it, or made by the worker itself.
    (
        "non-referencing volumes",
        {
            "volumes": [
                _volume("emptyDir", {}),
                _volume("hostPath", {"path": "/settings"}),
                _volume("persistentVolumeClaim", {"claimName": "data"}),
                _volume("downwardAPI", {"items": [{"path": "creds"}]}),
                _volume("nfs", {"server": "settings", "path": "/"}),
            ]
        },
        (),
    ),
    (
        "csi has no secretRef (the apiserver drops it)",
        {"volumes": [_volume("csi", {"driver": "d", "secretRef": {"name": "not-a-field"}})]},
        (),
    ),
    (
        "worker-provided: default ServiceAccount and kube-root-ca.crt",
        {
            "serviceAccountName": "default",
            "volumes": [
                _volume("configMap", {"name": "kube-root-ca.crt"}),
                _volume("projected", {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}),
            ],
        },
        (),
    ),
    (
        "a Secret named kube-root-ca.crt is not the worker's",
        {"volumes": [_volume("secret", {"secretName": "kube-root-ca.crt"})]},
        (Dependency(SECRET, "kube-root-ca.crt"),),
    ),
    (
        "a ServiceAccount named default-ish is named",
        {"serviceAccountName": "defaults"},
        (Dependency(SA, "defaults"),),
    ),
    ("empty names are none", {"serviceAccountName": "", "imagePullSecrets": [{"name": ""}]}, ()),
]


@pytest.mark.parametrize(("spec", "expected"), [p[1:] for p in PLACES], ids=[p[0] for p in PLACES])
def test_every_place_a_pod_spec_names_a_dependency(
    spec: JsonObj, expected: tuple[Dependency, ...]
) -> None:
    assert dependencies([_template(spec)]) == expected


# (case, templates, what they name): optional only when every reference says so.
OPTIONAL: list[tuple[str, list[JsonObj], tuple[Dependency, ...]]] = [
    (
        "optional volume",
        [_template({"volumes": [_volume("configMap", {"name": "m", "optional": True})]})],
        (Dependency(CM, "m", optional=True),),
    ),
    (
        "optional: false is required",
        [_template({"volumes": [_volume("secret", {"secretName": "s", "optional": False})]})],
        (Dependency(SECRET, "s"),),
    ),
    (
        "optional: 'true' (a string) is not optional",
        [_template({"volumes": [_volume("configMap", {"name": "m", "optional": "true"})]})],
        (Dependency(CM, "m"),),
    ),
    (
        "optional envFrom, keyRef and projected",
        [
            _template(
                {
                    "containers": [
                        _container(
                            envFrom=[{"secretRef": {"name": "s", "optional": True}}],
                            env=[
                                {
                                    "name": "A",
                                    "valueFrom": {
                                        "configMapKeyRef": {
                                            "name": "m",
                                            "key": "k",
                                            "optional": True,
                                        }
                                    },
                                }
                            ],
                        )
                    ],
                    "volumes": [
                        _volume(
                            "projected",
                            {"sources": [{"secret": {"name": "p", "optional": True}}]},
                        )
                    ],
                }
            )
        ],
        (
            Dependency(CM, "m", optional=True),
            Dependency(SECRET, "p", optional=True),
            Dependency(SECRET, "s", optional=True),
        ),
    ),
    (
        "one required reference in the same template makes it required",
        [
            _template(
                {
                    "volumes": [_volume("configMap", {"name": "m", "optional": True})],
                    "initContainers": [_container(envFrom=[{"configMapRef": {"name": "m"}}])],
                }
            )
        ],
        (Dependency(CM, "m"),),
    ),
    (
        "one required reference in another template makes it required",
        [
            _template({"volumes": [_volume("secret", {"secretName": "s", "optional": True})]}),
            _template({"containers": [_container(envFrom=[{"secretRef": {"name": "s"}}])]}),
        ],
        (Dependency(SECRET, "s"),),
    ),
    (
        "required then optional stays required",
        [
            _template({"containers": [_container(envFrom=[{"secretRef": {"name": "s"}}])]}),
            _template({"volumes": [_volume("secret", {"secretName": "s", "optional": True})]}),
        ],
        (Dependency(SECRET, "s"),),
    ),
    (
        "storage drivers' Secrets are never optional",
        [_template({"volumes": [_volume("csi", {"nodePublishSecretRef": {"name": "c"}})]})],
        (Dependency(SECRET, "c"),),
    ),
]


@pytest.mark.parametrize(
    ("templates", "expected"), [o[1:] for o in OPTIONAL], ids=[o[0] for o in OPTIONAL]
)
def test_optional_only_when_every_reference_says_so(
    templates: list[JsonObj], expected: tuple[Dependency, ...]
) -> None:
    assert dependencies(templates) == expected


def test_a_configmap_and_a_secret_of_one_name_are_two() -> None:
    spec = {
        "volumes": [
            _volume("configMap", {"name": "same"}),
            _volume("secret", {"secretName": "same"}),
        ],
        "serviceAccountName": "same",
    }
    assert dependencies([_template(spec)]) == (
        Dependency(CM, "same"),
        Dependency(SECRET, "same"),
        Dependency(SA, "same"),
    )
    assert [str(d) for d in dependencies([_template(spec)])] == [
        "configmap/same",
        "secret/same",
        "serviceaccount/same",
    ]


# Wrong types anywhere: nothing raises, nothing is made up.
MALFORMED: list[Any] = [
    None,
    "spec",
    [],
    {"spec": None},
    {"spec": "x"},
    {"spec": {"volumes": "settings"}},
    {"spec": {"volumes": [None, "v", 3, {"configMap": "settings"}, {"configMap": None}]}},
    {"spec": {"volumes": [{"configMap": {"name": 5}}, {"secret": {"secretName": ["s"]}}]}},
    {"spec": {"volumes": [{"projected": {"sources": "x"}}, {"projected": {"sources": [None]}}]}},
    {"spec": {"volumes": [{"projected": {"sources": [{"secret": "s"}, {"configMap": []}]}}]}},
    {"spec": {"volumes": [{"csi": {"nodePublishSecretRef": "s"}}, {"rbd": {"secretRef": 1}}]}},
    {"spec": {"volumes": [{"azureFile": {"secretName": {"name": "s"}}}, {"csi": "x"}]}},
    {"spec": {"containers": "main"}},
    {"spec": {"containers": [None, 1, {"envFrom": "x"}, {"env": {"A": "b"}}]}},
    {"spec": {"containers": [{"envFrom": [None, {"configMapRef": "m"}, {"secretRef": 2}]}]}},
    {"spec": {"initContainers": [{"env": [None, {"valueFrom": "x"}, {"valueFrom": None}]}]}},
    {"spec": {"ephemeralContainers": [{"env": [{"valueFrom": {"secretKeyRef": []}}]}]}},
    {"spec": {"imagePullSecrets": "registry"}},
    {"spec": {"imagePullSecrets": [None, "registry", {"name": None}]}},
    {"spec": {"serviceAccountName": 3, "serviceAccount": ["x"]}},
    {"spec": {"serviceAccountName": {"name": "x"}}},
]


@pytest.mark.parametrize("template", MALFORMED)
def test_malformed_input_names_nothing_and_never_raises(template: Any) -> None:
    assert dependencies([template]) == ()
    assert claim_names([template]) == ()


def test_malformed_parts_do_not_hide_good_ones() -> None:
    spec = {
        "volumes": [None, {"configMap": 5}, {"configMap": {"name": "good"}}],
        "containers": ["x", _container(envFrom=[None, {"secretRef": {"name": "fine"}}])],
        "imagePullSecrets": [3, {"name": "pull"}],
    }
    assert dependencies([_template(spec)]) == (
        Dependency(CM, "good"),
        Dependency(SECRET, "fine"),
        Dependency(SECRET, "pull", True),
    )


# -- claims --------------------------------------------------------------------------------


CLAIMS: list[tuple[str, list[Any], tuple[str, ...]]] = [
    ("none", [_template({"containers": [_container()]})], ()),
    (
        "each once, sorted, over templates",
        [
            _template(
                {
                    "volumes": [
                        _volume("persistentVolumeClaim", {"claimName": "data"}),
                        _volume(
                            "persistentVolumeClaim", {"claimName": "archive", "readOnly": True}
                        ),
                    ]
                }
            ),
            _template({"volumes": [_volume("persistentVolumeClaim", {"claimName": "data"})]}),
        ],
        ("archive", "data"),
    ),
    (
        "ephemeral volumes name none",
        [_template({"volumes": [_volume("ephemeral", {"volumeClaimTemplate": {"spec": {}}})]})],
        (),
    ),
    (
        "other volumes name none",
        [
            _template(
                {
                    "volumes": [
                        _volume("configMap", {"name": "data"}),
                        _volume("hostPath", {"path": "data"}),
                    ]
                }
            )
        ],
        (),
    ),
    (
        "malformed claims name none",
        [
            _template(
                {
                    "volumes": [
                        _volume("persistentVolumeClaim", {"claimName": ""}),
                        _volume("persistentVolumeClaim", {"claimName": 3}),
                        _volume("persistentVolumeClaim", "data"),
                        _volume("persistentVolumeClaim", {"claimName": "ok"}),
                    ]
                }
            )
        ],
        ("ok",),
    ),
]


@pytest.mark.parametrize(
    ("templates", "expected"), [c[1:] for c in CLAIMS], ids=[c[0] for c in CLAIMS]
)
def test_claim_names(templates: list[Any], expected: tuple[str, ...]) -> None:
    assert claim_names(templates) == expected


# -- properties: nothing unreferenced is ever named ------------------------------------------

_names = st.text(alphabet="abcdefgh-.0123456789", min_size=0, max_size=6)
_optional = st.sampled_from([None, True, False, "true", 1])
_SECRET_DRIVERS = ("cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos")
_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")


def _opt(body: dict[str, Any], optional: Any) -> dict[str, Any]:
    return body if optional is None else {**body, "optional": optional}


# One place each: (how it is written into a pod spec, the kind it names or None for a
# place that names nothing outside the pod).
def _place(spec: dict[str, Any], where: str, name: str, optional: Any) -> str | None:
    volumes = spec.setdefault("volumes", [])
    containers = spec.setdefault(_CONTAINERS[len(name) % 3], [])
    if not containers:
        containers.append(_container())
    container = containers[-1]
    match where:
        case "volume-configmap":
            volumes.append(_volume("configMap", _opt({"name": name}, optional)))
            return CM
        case "volume-secret":
            volumes.append(_volume("secret", _opt({"secretName": name}, optional)))
            return SECRET
        case "projected-configmap":
            volumes.append(
                _volume("projected", {"sources": [{"configMap": _opt({"name": name}, optional)}]})
            )
            return CM
        case "projected-secret":
            volumes.append(
                _volume("projected", {"sources": [{"secret": _opt({"name": name}, optional)}]})
            )
            return SECRET
        case "csi":
            volumes.append(_volume("csi", {"driver": name, "nodePublishSecretRef": {"name": name}}))
            return SECRET
        case "azure":
            volumes.append(_volume("azureFile", {"secretName": name, "shareName": name}))
            return SECRET
        case "envfrom-configmap":
            container.setdefault("envFrom", []).append(
                {"configMapRef": _opt({"name": name}, optional)}
            )
            return CM
        case "envfrom-secret":
            container.setdefault("envFrom", []).append(
                {"secretRef": _opt({"name": name}, optional)}
            )
            return SECRET
        case "env-configmap":
            ref = _opt({"name": name, "key": name}, optional)
            container.setdefault("env", []).append(
                {"name": name, "valueFrom": {"configMapKeyRef": ref}}
            )
            return CM
        case "env-secret":
            ref = _opt({"name": name, "key": name}, optional)
            container.setdefault("env", []).append(
                {"name": name, "valueFrom": {"secretKeyRef": ref}}
            )
            return SECRET
        case "pull":
            spec.setdefault("imagePullSecrets", []).append({"name": name})
            return SECRET
        case "account":
            spec["serviceAccountName"] = name
            return SA
        case where if where in _SECRET_DRIVERS:
            volumes.append(_volume(where, {"secretRef": {"name": name}}))
            return SECRET
        # Places that hold a name but reference nothing outside the pod.
        case "container-name":
            container["name"] = name
        case "image":
            container["image"] = name
        case "volume-name":
            volumes.append({"name": name, "emptyDir": {}})
        case "host-path":
            volumes.append(_volume("hostPath", {"path": name}))
        case "claim":
            volumes.append(_volume("persistentVolumeClaim", {"claimName": name}))
        case "env-value":
            container.setdefault("env", []).append({"name": name, "value": name})
        case "field-ref":
            container.setdefault("env", []).append(
                {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": name}}}
            )
        case "volume-mount":
            container.setdefault("volumeMounts", []).append({"name": name, "mountPath": "/" + name})
        case "node-selector":
            spec.setdefault("nodeSelector", {})[name] = name
        case "token":
            volumes.append(
                _volume(
                    "projected",
                    {"sources": [{"serviceAccountToken": {"audience": name, "path": "t"}}]},
                )
            )
    return None


_PLACES = (
    "volume-configmap", "volume-secret", "projected-configmap", "projected-secret", "csi",
    "azure", "envfrom-configmap", "envfrom-secret", "env-configmap", "env-secret", "pull",
    "account", *_SECRET_DRIVERS, "container-name", "image", "volume-name", "host-path",
    "claim", "env-value", "field-ref", "volume-mount", "node-selector", "token",
)  # fmt: skip
_placements = st.lists(
    st.lists(st.tuples(st.sampled_from(_PLACES), _names, _optional), max_size=12),
    min_size=1,
    max_size=3,
)


def _required_always(where: str) -> bool:
    """Places whose Secret has no ``optional`` field (the apiserver would drop it)."""
    return where in ("csi", "azure", *_SECRET_DRIVERS)


@given(_placements)
def test_only_what_is_referenced_is_named(placements: list[list[tuple[str, str, Any]]]) -> None:
    templates = []
    referenced: dict[tuple[str, str], bool] = {}
    for of_template in placements:
        spec: dict[str, Any] = {}
        references: list[tuple[str, str, bool]] = []
        for where, name, optional in of_template:
            kind = _place(spec, where, name, optional)
            if kind is not None and kind != SA:
                optional_here = where == "pull" or (
                    optional is True and not _required_always(where)
                )
                references.append((kind, name, optional_here))
        # One ServiceAccount per pod: the last one written.
        references.append((SA, spec.get("serviceAccountName", ""), False))
        for kind, name, optional_here in references:
            if name and (kind, name) not in {(CM, "kube-root-ca.crt"), (SA, "default")}:
                referenced[(kind, name)] = referenced.get((kind, name), True) and optional_here
        templates.append(_template(spec))
    found = dependencies(templates)
    # Every name returned appears in a referencing place, and every reference is returned.
    assert {(d.kind, d.name): d.optional for d in found} == referenced
    keys = [(d.kind, d.name) for d in found]
    assert keys == sorted(set(keys))


@given(_placements)
def test_claims_are_only_the_claims(placements: list[list[tuple[str, str, Any]]]) -> None:
    templates, claimed = [], set()
    for of_template in placements:
        spec: dict[str, Any] = {}
        for where, name, optional in of_template:
            _place(spec, where, name, optional)
            if where == "claim" and name:
                claimed.add(name)
        templates.append(_template(spec))
    assert claim_names(templates) == tuple(sorted(claimed))
