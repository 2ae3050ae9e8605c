"""The operator's levers and live state: `leases`, `tenants` (`webhooks`: cli/webhooks.py).

Every read here is bounded by live work or by tenants: the leases table
holds live leases and one counter per tenant.
"""

from __future__ import annotations

import json
import time

import click

from imposer.cli.common import TABLE_NAMES, handle_errors, settings_options
from imposer.settings import Settings

#: A cap above any fleet's slot count means "no cap"; DynamoDB numbers stop at 38 digits.
MAX_CAP = 100_000


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of lease objects.")
@settings_options(*TABLE_NAMES)
@handle_errors
def leases(settings: Settings, as_json: bool) -> None:
    """Show live leases: tenant, job, host, slot, age, expires in."""
    from imposer.worker.wiring import connect

    backends = connect(settings)
    now = time.time()
    rows = backends.leases.leases()
    if as_json:
        click.echo(json.dumps([{
            "tenant_id": lease.tenant_id, "job_id": lease.job_id, "host": lease.host,
            "slot": lease.slot, "acquired_at": lease.acquired_at,
            "expires_at": lease.expires_at, "borrowed": lease.borrowed,
            "age_seconds": round(now - lease.acquired_at, 3),
            "expires_in_seconds": round(lease.expires_at - now, 3)} for lease in rows], indent=2))
        return
    if not rows:
        click.echo("no live leases")
        return
    click.echo(f"{'TENANT':16} {'JOB':34} {'HOST':16} {'SLOT':>4} {'AGE':>8} {'EXPIRES IN':>10}")
    for lease in rows:
        click.echo(f"{lease.tenant_id:16} {lease.job_id:34} {lease.host:16} {lease.slot:>4} "
                   f"{now - lease.acquired_at:>7.0f}s {lease.expires_at - now:>9.0f}s")


@click.group()
def tenants() -> None:
    """Tier overrides: per-tenant caps and webhook settings."""


@tenants.command("set")
@click.argument("tenant")
@click.option("--cap", type=click.IntRange(min=0, max=MAX_CAP),
              help="Concurrency cap (0 pauses the tenant).")
@click.option("--clear-cap", "clear_cap", is_flag=True,
              help="Drop the tier override: the tenant gets the default cap again.")
@click.option("--default-cap-override", "default_cap_override", is_flag=True, hidden=True,
              deprecated="it drops the override: say --clear-cap")
@click.option("--webhook-secret", metavar="SECRET|generate",
              help="Secret that signs this tenant's webhooks; 'generate' makes a Standard "
                   "Webhooks whsec_ secret and prints it once. Replaces the current secret "
                   "and any previous one, unless --keep-old-secret.")
@click.option("--keep-old-secret", "keep_old", is_flag=True,
              help="With --webhook-secret: deliveries carry a signature by the current secret "
                   "too, until --drop-old-secret, so receivers can switch at their own pace.")
@click.option("--drop-old-secret", "drop_old", is_flag=True,
              help="Stop signing with the secret kept by --keep-old-secret.")
@click.option("--webhook-host", "webhook_hosts", multiple=True, metavar="HOST",
              callback=lambda ctx, param, hosts: _hosts(hosts),
              help="Host a webhook URL may point at (repeat; *.example.com allowed). Replaces "
                   "the list.")
@click.option("--sender", "senders", multiple=True, metavar="SENDER_ID",
              help="SQS sender that may send this tenant's jobs: an IAM user id (AIDA...) or "
                   "role id (AROA..., any session; AROA...:session for one). Repeat; replaces "
                   "the list. Messages from anyone else naming TENANT are dead-lettered.")
@click.option("--clear-senders", is_flag=True,
              help="Unbind every sender (then IMPOSER_REQUIRE_SENDERS decides).")
@click.option("--weight", type=str, metavar="W",
              help="Fair-share weight when IMPOSER_SHARE_HALF_LIFE is set: licence time is "
                   "shared in proportion (default 1; 0 pauses the tenant).")
@click.option("--clear-weight", is_flag=True, help="Drop the weight: the tenant weighs 1.")
@click.option("--express/--no-express", default=None,
              help="The express class: with IMPOSER_BORROW on, the tenant's parked jobs may "
                   "borrow the reserve slots too (docs/priority.rst, fleet-wide classes).")
@click.option("--default-cap", "default_cap", type=int, hidden=True,
              help="Refused: it would set no tenant's cap.")
@settings_options(*TABLE_NAMES)
@handle_errors
def tenants_set(settings: Settings, tenant: str, cap, clear_cap, default_cap_override,
                webhook_secret, keep_old, drop_old, webhook_hosts, senders, clear_senders,
                weight, clear_weight, express, default_cap) -> None:
    """Set TENANT's cap, weight, class or webhooks; the next acquire sees it, no restart.

    The default cap of tenants without an override is each worker's own
    IMPOSER_DEFAULT_CAP; no command changes it in the table.
    """
    import attrs

    from imposer.models import TenantConfig, valid_id
    from imposer.models.senders import valid_sender
    from imposer.models.signature import new_secret
    from imposer.worker.wiring import connect

    if default_cap is not None:
        raise click.UsageError("--default-cap sets no tenant's cap: the default is each "
                               "worker's IMPOSER_DEFAULT_CAP; give TENANT --cap N, or "
                               "--clear-cap to give it the default")
    clear_cap = clear_cap or default_cap_override
    if not valid_id(tenant):
        raise click.BadParameter(f"{tenant!r} is not a tenant id (1-128 of A-Z a-z 0-9 . _ -, "
                                 "starting with a letter or digit)", param_hint="TENANT")
    if cap is not None and clear_cap:
        raise click.UsageError("--cap and --clear-cap contradict each other; give one")
    if senders and clear_senders:
        raise click.UsageError("--sender and --clear-senders contradict each other; give one")
    if weight is not None and clear_weight:
        raise click.UsageError("--weight and --clear-weight contradict each other; give one")
    if weight is not None:
        weight = _weight(weight)
    if keep_old and not webhook_secret:
        raise click.UsageError("--keep-old-secret keeps the current secret beside a new one: "
                               "give --webhook-secret NEW|generate too")
    if keep_old and drop_old:
        raise click.UsageError("--keep-old-secret and --drop-old-secret contradict each "
                               "other; give one")
    for sender in senders:
        if not valid_sender(sender):
            raise click.BadParameter(f"{sender[:100]!r} is not a sender id (the UserId of an IAM "
                                     "user, AIDA..., or the RoleId of a role, AROA..., as "
                                     "`aws iam get-user` / `get-role` print them; a role id "
                                     "may end in :session)", param_hint="--sender")
    if cap is None and not clear_cap and not webhook_secret and not webhook_hosts \
            and not senders and not clear_senders and weight is None and not clear_weight \
            and not drop_old and express is None:
        raise click.UsageError("nothing to set: give --cap, --clear-cap, --weight, "
                               "--clear-weight, --express, --no-express, --webhook-secret, "
                               "--drop-old-secret, --webhook-host, --sender or --clear-senders")
    generated = webhook_secret == "generate"
    store = connect(settings).tenants
    current = store.get(tenant) or TenantConfig(tenant_id=tenant)
    changes: dict = {}
    if cap is not None or clear_cap:
        changes["cap"] = cap
    if keep_old and not current.webhook_secret:
        raise click.UsageError(f"{tenant} has no webhook secret to keep: set one without "
                               "--keep-old-secret")
    if keep_old and webhook_secret == current.webhook_secret:
        raise click.UsageError("the new secret is the current one: nothing would rotate")
    if webhook_secret:
        changes["webhook_secret"] = new_secret() if generated else webhook_secret
        changes["webhook_secret_previous"] = current.webhook_secret if keep_old else None
    if drop_old:
        changes["webhook_secret_previous"] = None
    if webhook_hosts:
        changes["webhook_hosts"] = tuple(webhook_hosts)
    if senders or clear_senders:
        changes["senders"] = tuple(senders)
    if weight is not None or clear_weight:
        changes["weight"] = weight
    if express is not None:
        changes["express"] = express
    updated = attrs.evolve(current, **changes)
    store.put(updated)
    click.echo(_describe(updated, settings.default_cap, show_secret=generated))


def _weight(text: str) -> float:
    """``--weight``: a number from 0 up, or the one-line usage error that says so."""
    from imposer.state.tenants import weight_problem

    try:
        weight = float(text)
    except ValueError:
        raise click.BadParameter(f"{text[:40]!r} is not a number (a weight is 0, which "
                                 "pauses the tenant, or more)", param_hint="--weight") from None
    problem = weight_problem(weight)
    if problem:
        raise click.BadParameter(problem, param_hint="--weight")
    return weight


def _hosts(hosts: tuple[str, ...]) -> tuple[str, ...]:
    from imposer.webhooks.urlguard import host_pattern_problem

    for host in hosts:
        problem = host_pattern_problem(host)
        if problem:
            raise click.BadParameter(f"{host[:100]!r} is {problem}", param_hint="--webhook-host")
    return hosts


def _describe(config, default_cap: int, show_secret: bool = False) -> str:
    cap = f"{config.cap}" if config.cap is not None else f"{default_cap} (default)"
    if config.cap == 0:
        cap += " (paused)"
    secret = "not set"
    if config.webhook_secret:
        secret = config.webhook_secret if show_secret else "set"
        if config.webhook_secret_previous:
            secret += " (the previous one signs too, until --drop-old-secret)"
    hosts = ", ".join(config.webhook_hosts) or "none"
    senders = ", ".join(config.senders) or "none bound"
    weight = "" if config.weight is None else f"; weight {config.weight:g}" + \
        (" (paused under fair share)" if config.weight == 0 else "")
    return (f"{config.tenant_id}: cap {cap}; webhook secret {secret}; webhook hosts {hosts}; "
            f"senders {senders}{weight}" + ("; class express" if config.express else ""))


@tenants.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of tenant objects.")
@settings_options(*TABLE_NAMES, "default_cap")
@handle_errors
def tenants_list(settings: Settings, as_json: bool) -> None:
    """List every tenant imposer knows, its effective cap and how many slots it holds.

    Tenants with a config row and tenants that have run jobs without one
    (shown with the default cap).
    """
    from imposer.models import TenantConfig
    from imposer.worker.wiring import connect

    backends = connect(settings)
    counters = backends.leases.counters()
    configs = {c.tenant_id: c for c in backends.tenants.list()}
    rows = []
    for name in sorted(set(configs) | set(counters)):
        config = configs.get(name) or TenantConfig(tenant_id=name)
        counter = counters.get(name)
        rows.append({"tenant_id": name,
                     "cap": config.cap if config.cap is not None else settings.default_cap,
                     "override": config.cap is not None,
                     "weight": config.weight if config.weight is not None else 1.0,
                     "express": config.express,
                     "inflight": counter.inflight if counter else 0,
                     "borrowed": counter.borrowed if counter else 0,
                     "webhook_hosts": list(config.webhook_hosts),
                     "senders": list(config.senders)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"default cap {settings.default_cap}")
    for r in rows:
        tag = "" if r["override"] else " (default)"
        click.echo(f"{r['tenant_id']:20} cap {r['cap']}{tag:10} inflight {r['inflight']}"
                   + (f" weight {r['weight']:g}" if r["weight"] != 1.0 else "")
                   + (" express" if r["express"] else ""))
