"""`jobrelay run`'s --api-* flags (the remote logs API), gathered into one ApiSettings."""

from __future__ import annotations

import functools
from typing import Any

import click

from jobrelay.relayapi.auto_register_rules import ALWAYS, AUTO, REGISTER_MODES
from jobrelay.relayapi.managedby_webhook_rules import FAILURE_POLICIES
from jobrelay.relayapi.settings import ApiSettings
from jobrelay.vocabulary.go_durations import go_duration_text, parse_go_duration
from jobrelay.web.probe_server import parse_address

_DEFAULTS = ApiSettings()


def _address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if value:
        try:
            parse_address(value)
        except ValueError as error:
            raise click.BadParameter(str(error)) from error
    return value


def _lifetime(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    try:
        seconds = parse_go_duration(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from error
    if seconds < 3600:
        raise click.BadParameter("at least an hour (1h)")
    return seconds


_OPTIONS = [
    click.option(
        "--api-address",
        default=_DEFAULTS.address,
        callback=_address,
        metavar="HOST:PORT",
        help="Serve the aggregated API api.jobrelay.dev (`jobrelay logs`) here, to the "
        "manager's front proxy only (e.g. :8443; port 0 picks a free one, logged) "
        "[default: none; 127.0.0.1:0 with --api-register auto on a loopback manager].",
    ),
    click.option(
        "--api-url",
        default=_DEFAULTS.url,
        metavar="URL",
        help="The API's URL as the aggregator reaches it (its Service), named in a "
        "self-signed certificate [default: none].",
    ),
    click.option(
        "--api-register",
        type=click.Choice(REGISTER_MODES),
        default=AUTO,
        show_default=True,
        is_flag=False,
        flag_value=ALWAYS,
        help="Whether the leader registers APIService v1alpha1.api.jobrelay.dev and Service "
        "<--namespace>/jobrelay-api reaching this replica, with its certificate's CA. auto: "
        "when the manager's URL is on loopback (127.0.0.0/8, ::1, localhost: the local "
        "fleet), then serving on 127.0.0.1:0 if --api-address names none; never otherwise "
        "(the chart registers its own). --api-register alone: always (needs --api-address).",
    ),
    click.option(
        "--webhook-failure-policy",
        type=click.Choice(FAILURE_POLICIES),
        default=_DEFAULTS.webhook_failure_policy,
        show_default=True,
        help="The failurePolicy of the managedBy defaulting webhook registered with the "
        "APIService (MutatingWebhookConfiguration jobrelay-managedby). Fail: a workload it "
        "would default (in a namespace labelled jobrelay.dev/relay=enabled, or labelled "
        "jobrelay.dev/queue) is refused while no controller answers, never run on the "
        "manager; Ignore: it is created unchanged then.",
    ),
    click.option(
        "--api-cert-file",
        default=_DEFAULTS.cert_file,
        metavar="PEM",
        help="The API's serving certificate [default: self-signed at start].",
    ),
    click.option(
        "--api-key-file",
        default=_DEFAULTS.key_file,
        metavar="PEM",
        help="The key of --api-cert-file.",
    ),
    click.option(
        "--api-ca-file",
        default=_DEFAULTS.ca_file,
        metavar="PEM",
        help="The CA that signed --api-cert-file, the APIService's caBundle (one CA for every "
        "replica) [default: the certificate itself].",
    ),
    click.option(
        "--api-cert-secret",
        default=_DEFAULTS.cert_secret,
        metavar="NAME",
        help="Make and keep the API's certificate in this kubernetes.io/tls Secret of "
        "--namespace: the first replica to start creates a CA and a serving certificate for "
        "--api-url's Service names, every replica serves it, and the leader renews it at two "
        "thirds of its life (the CA kept) and writes the CA into the caBundle of APIService "
        "v1alpha1.api.jobrelay.dev (the chart's selfSigned source). Not with --api-cert-file.",
    ),
    click.option(
        "--api-ca-bundle-webhook",
        default=_DEFAULTS.ca_bundle_webhook,
        metavar="NAME",
        help="With --api-cert-secret: the MutatingWebhookConfiguration (the chart's "
        "managedBy webhook) whose caBundle the leader keeps at the Secret's CA too.",
    ),
    click.option(
        "--api-ca-validity",
        default=go_duration_text(_DEFAULTS.ca_validity),
        show_default=True,
        callback=_lifetime,
        metavar="DURATION",
        help="How long --api-cert-secret's CA is made to last (remade, with a new caBundle, "
        "at two thirds of it).",
    ),
    click.option(
        "--api-cert-validity",
        default=go_duration_text(_DEFAULTS.cert_validity),
        show_default=True,
        callback=_lifetime,
        metavar="DURATION",
        help="How long --api-cert-secret's serving certificate is made to last (renewed at "
        "two thirds of it).",
    ),
    click.option(
        "--api-cert-reload-interval",
        default=_DEFAULTS.cert_reload_interval,
        show_default=True,
        type=click.FloatRange(0.1, 60.0),
        help="Seconds between reads of --api-cert-file, --api-key-file and --api-ca-file for "
        "a renewed certificate (served from the next connection on, no restart), and between "
        "the leader's checks of --api-cert-secret.",
    ),
    click.option(
        "--api-max-streams-per-user",
        default=_DEFAULTS.max_streams_per_user,
        show_default=True,
        type=click.IntRange(1),
        help="Pod log streams one user may hold open at once (--all-pods: one per pod).",
    ),
    click.option(
        "--api-max-streams-per-worker",
        default=_DEFAULTS.max_streams_per_worker,
        show_default=True,
        type=click.IntRange(1),
        help="Pod log streams open at once from one worker (its own connection pool, "
        "apart from the health probe's and the informers').",
    ),
    click.option(
        "--api-max-streams",
        default=_DEFAULTS.max_streams,
        show_default=True,
        type=click.IntRange(1),
        help="Pod log streams open at once in all.",
    ),
    click.option(
        "--api-max-bytes",
        default=_DEFAULTS.max_bytes,
        show_default=True,
        type=click.IntRange(1),
        help="Bytes one log request returns at most, unless following.",
    ),
    click.option(
        "--api-follow-idle-timeout",
        default=_DEFAULTS.follow_idle_timeout,
        show_default=True,
        type=click.FloatRange(0.1),
        help="Seconds a follow (-f) waits for output before it ends.",
    ),
    click.option(
        "--api-max-follow-bytes",
        default=_DEFAULTS.max_follow_bytes,
        show_default=True,
        type=click.IntRange(1),
        help="Bytes one followed pod passes on at most; then its follow stops.",
    ),
    click.option(
        "--api-follow-rate",
        default=_DEFAULTS.follow_rate,
        show_default=True,
        type=click.IntRange(1),
        help="Bytes a second one followed pod passes on at most (faster output waits).",
    ),
    click.option(
        "--api-write-timeout",
        default=_DEFAULTS.write_timeout,
        show_default=True,
        type=click.FloatRange(0.1),
        help="Seconds a client may take to accept each write; one that stops reading is "
        "dropped and its streams end.",
    ),
    click.option(
        "--api-max-watches",
        default=_DEFAULTS.max_watches,
        show_default=True,
        type=click.IntRange(1),
        help="Panel watches (the dashboard's live fleet, queues and workloads) open at once.",
    ),
    click.option(
        "--api-max-watches-per-user",
        default=_DEFAULTS.max_watches_per_user,
        show_default=True,
        type=click.IntRange(1),
        help="Panel watches one user may hold open at once (a dashboard holds three).",
    ),
]


def api_options(func: Any) -> Any:
    """Adds the --api-* flags; the command receives them as one ``api: ApiSettings`` and
    ``api_register``, the mode (auto_register_rules) that settles its address and
    ``register`` once the manager's URL is known."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["api"] = ApiSettings(
            address=kwargs.pop("api_address"),
            url=kwargs.pop("api_url"),
            # Decided by `jobrelay run` once it knows the manager's URL (api_register).
            register=False,
            cert_file=kwargs.pop("api_cert_file"),
            key_file=kwargs.pop("api_key_file"),
            ca_file=kwargs.pop("api_ca_file"),
            cert_secret=kwargs.pop("api_cert_secret"),
            ca_bundle_webhook=kwargs.pop("api_ca_bundle_webhook"),
            ca_validity=kwargs.pop("api_ca_validity"),
            cert_validity=kwargs.pop("api_cert_validity"),
            cert_reload_interval=kwargs.pop("api_cert_reload_interval"),
            max_streams_per_user=kwargs.pop("api_max_streams_per_user"),
            max_streams_per_worker=kwargs.pop("api_max_streams_per_worker"),
            max_streams=kwargs.pop("api_max_streams"),
            max_bytes=kwargs.pop("api_max_bytes"),
            follow_idle_timeout=kwargs.pop("api_follow_idle_timeout"),
            max_follow_bytes=kwargs.pop("api_max_follow_bytes"),
            follow_rate=kwargs.pop("api_follow_rate"),
            write_timeout=kwargs.pop("api_write_timeout"),
            max_watches=kwargs.pop("api_max_watches"),
            max_watches_per_user=kwargs.pop("api_max_watches_per_user"),
            webhook_failure_policy=kwargs.pop("webhook_failure_policy"),
        )
        return func(*args, **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


__all__ = ["api_options"]
