"""What `sglang-deploy status` prints of the alerts each Prometheus fires, and where `lab monitor` left Prometheus."""

from __future__ import annotations

LOOPBACK = ("127.0.0.1", "[::1]", "localhost")


def format_alerts(alerts: dict) -> list[str]:
    """Per monitoring host (api.Alerts): its firing alerts, `NAME on INSTANCE (severity, since): summary`, or why
    they were not read."""
    lines = []
    for host, found in sorted(alerts.items()):
        if found.error:
            lines.append(f"\nalerts of the Prometheus on {host}: NOT READ: {found.error}")
            continue
        pending = f" ({found.pending} pending)" if found.pending else ""
        lines.append(f"\nalerts firing (Prometheus on {host}): {found.firing or 'none'}{pending}")
        for a in found.alerts:
            when = ", ".join(x for x in (a.severity, f"since {a.since}" if a.since else "") if x)
            line = f"  {a.name or '?'} on {a.instance or '?'}" + (f" ({when})" if when else "")
            lines.append(f"{line}: {a.summary}" if a.summary else line)
        if found.firing > len(found.alerts):
            lines.append(f"  ... and {found.firing - len(found.alerts)} more (the Prometheus UI lists them)")
    return lines


def format_prometheus(urls: dict, inventory: str) -> list[str]:
    """Where each Prometheus answers, how to reach it, and the commands that read its alerts."""
    lines = []
    for host, url in sorted(urls.items()):
        address = url.removeprefix("http://").rsplit(":", 1)[0]
        if address in LOOPBACK:
            reach = (
                f"on {host}'s loopback only: `docker exec {host} curl -s {url}/api/v1/alerts`, or an SSH tunnel "
                f"(ssh -L 9090:127.0.0.1:{url.rsplit(':', 1)[1]} {host})"
            )
        else:
            reach = "the host's own address; on the lab the container's on Docker's bridge, which this machine reaches"
        lines.append(f"Prometheus on {host}: {url} ({reach})")
        # Debian's and Ubuntu's prometheus package (what the role installs) serves the classic UI only.
        lines.append(f"  alerts page: {url}/classic/alerts; targets: {url}/classic/targets")
    lines.append(f"alerts in the status: sglang-deploy status -i {inventory}")
    lines.append(f"deploys that keep the metrics on: sglang-deploy deploy PROFILE -i {inventory}")
    return lines
