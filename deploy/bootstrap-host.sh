#!/usr/bin/env bash
# Make this machine a licensed imposer host, or upgrade one: run as root.
#
# The host stack's user data (deploy/imposer-host.yaml) installs the operating system's
# packages, writes /etc/imposer/stack.env (the shared stack's EnvFile output) and runs
# this script with the variables below; an operator runs it again to upgrade
# (docs/deploy-on-aws.rst, "Day 2"). tests/deploy/test_bootstrap.py runs it on a local
# stack. In order, it
#
#   1. installs imposer into $IMPOSER_PREFIX/.venv from the wheel at
#      s3://$IMPOSER_BUCKET/$IMPOSER_WHEEL_KEY (its units and agent config travel in it);
#   2. installs pdfToolbox from the operator's installer at
#      s3://$IMPOSER_BUCKET/$PDFTOOLBOX_INSTALLER_KEY, unless the tool is there already;
#   3. activates the licence, unless the tool says one is active: the key is read from
#      the SecureString parameter $IMPOSER_LICENCE_PARAMETER and given on standard input
#      to the shell command $PDFTOOLBOX_ACTIVATE, never in an argument, file or log line
#      of the bootstrap's (e.g. 'read -r key; exec /opt/callas/pdfToolbox <callas' flags>');
#   4. writes $IMPOSER_ETC/imposer.env: the stack's settings and this host's own
#      (IMPOSER_HOST_ID is `uname -n`, the agent's log stream name);
#   5. installs the systemd units and the CloudWatch agent's config, and starts the
#      log shipping (and, with IMPOSER_RUNS_TIMERS=true, the sweep and capacity timers);
#   6. runs `imposer doctor`, and starts the worker only if it passes.
#
# Exit 0: the worker is running. Anything else: it is not, and the line before says why.
#
# Required: IMPOSER_BUCKET IMPOSER_WHEEL_KEY PDFTOOLBOX_INSTALLER_KEY
#           IMPOSER_LICENCE_PARAMETER PDFTOOLBOX_ACTIVATE
# Optional (defaults are a real host's): IMPOSER_LOG_GROUP IMPOSER_RUNS_TIMERS PYTHON
#   PDFTOOLBOX_HOME PDFTOOLBOX PDFTOOLBOX_INSTALL PDFTOOLBOX_REINSTALL IMPOSER_PREFIX
#   IMPOSER_ETC IMPOSER_USER IMPOSER_WORK IMPOSER_LOG_FILE SYSTEMD_DIR LOGROTATE_DIR SYSTEMCTL
#   CWAGENT_CTL CWAGENT_CONFIG IMPOSER_START_SECONDS
set -euo pipefail

say() { echo "bootstrap: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

for name in IMPOSER_BUCKET IMPOSER_WHEEL_KEY PDFTOOLBOX_INSTALLER_KEY \
            IMPOSER_LICENCE_PARAMETER PDFTOOLBOX_ACTIVATE; do
    [[ -n "${!name:-}" ]] || die "$name is not set (see the head of this script)"
done

PYTHON=${PYTHON:-python3}
PDFTOOLBOX_HOME=${PDFTOOLBOX_HOME:-/opt/callas}
PDFTOOLBOX=${PDFTOOLBOX:-$PDFTOOLBOX_HOME/pdfToolbox}
IMPOSER_PREFIX=${IMPOSER_PREFIX:-/opt/imposer}
IMPOSER_ETC=${IMPOSER_ETC:-/etc/imposer}
IMPOSER_USER=${IMPOSER_USER:-imposer}
IMPOSER_WORK=${IMPOSER_WORK:-/var/lib/imposer}
IMPOSER_LOG_FILE=${IMPOSER_LOG_FILE:-/var/log/imposer/worker.jsonl}
IMPOSER_LOG_GROUP=${IMPOSER_LOG_GROUP:-}
IMPOSER_RUNS_TIMERS=${IMPOSER_RUNS_TIMERS:-false}
IMPOSER_START_SECONDS=${IMPOSER_START_SECONDS:-60}
SYSTEMD_DIR=${SYSTEMD_DIR:-/etc/systemd/system}
LOGROTATE_DIR=${LOGROTATE_DIR:-/etc/logrotate.d}
SYSTEMCTL=${SYSTEMCTL:-systemctl}
CWAGENT_CTL=${CWAGENT_CTL:-/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl}
CWAGENT_CONFIG=${CWAGENT_CONFIG:-/opt/aws/amazon-cloudwatch-agent/etc/imposer.json}
VENV=$IMPOSER_PREFIX/.venv
SHARE=$VENV/share/imposer
STACK_ENV=$IMPOSER_ETC/stack.env
[[ -r $STACK_ENV ]] || die "$STACK_ENV is missing: write the shared stack's EnvFile output there"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# -- 1. imposer -----------------------------------------------------------------------
say "installing imposer from s3://$IMPOSER_BUCKET/$IMPOSER_WHEEL_KEY into $VENV"
[[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check 'boto3>=1.34'
# AWS calls go through boto3 in the venv (the AWS CLI need not be installed): `get` copies
# an object to a file; `secret` prints a SecureString parameter for a pipe.
aws_py() {
    "$VENV/bin/python" - "$@" <<'PY'
import sys, boto3
what, *args = sys.argv[1:]
if what == "get":
    bucket, key, path = args
    boto3.client("s3").download_file(bucket, key, path)
elif what == "secret":
    reply = boto3.client("ssm").get_parameter(Name=args[0], WithDecryption=True)
    sys.stdout.write(reply["Parameter"]["Value"])
PY
}
wheel=$scratch/$(basename "$IMPOSER_WHEEL_KEY")
aws_py get "$IMPOSER_BUCKET" "$IMPOSER_WHEEL_KEY" "$wheel" || die "cannot read the wheel"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "$wheel"
say "imposer $("$VENV/bin/imposer" --version 2>/dev/null || echo '?') installed"

# -- 2. pdfToolbox --------------------------------------------------------------------
# PDFTOOLBOX_INSTALL, if set, is a shell command run with the installer's path as $1; the
# default unpacks callas' .tar.gz into $PDFTOOLBOX_HOME.
if [[ -x $PDFTOOLBOX && -z ${PDFTOOLBOX_REINSTALL:-} ]]; then
    say "pdfToolbox is installed at $PDFTOOLBOX (set PDFTOOLBOX_REINSTALL=1 to install again)"
else
    installer=$scratch/$(basename "$PDFTOOLBOX_INSTALLER_KEY")
    say "installing pdfToolbox from s3://$IMPOSER_BUCKET/$PDFTOOLBOX_INSTALLER_KEY"
    aws_py get "$IMPOSER_BUCKET" "$PDFTOOLBOX_INSTALLER_KEY" "$installer" \
        || die "cannot read the pdfToolbox installer"
    if [[ -n ${PDFTOOLBOX_INSTALL:-} ]]; then
        sh -c "$PDFTOOLBOX_INSTALL" pdftoolbox-install "$installer" || die "PDFTOOLBOX_INSTALL failed"
    else
        install -d -m 0755 "$PDFTOOLBOX_HOME"
        tar -xzf "$installer" -C "$PDFTOOLBOX_HOME" || die "cannot unpack $installer"
    fi
    [[ -x $PDFTOOLBOX ]] || die "the installer left no executable at $PDFTOOLBOX"
fi
say "$("$PDFTOOLBOX" --version | head -n 1)"

# -- 3. the licence -------------------------------------------------------------------
# The same query doctor makes (IMPOSER_PDFTOOLBOX_LICENCE_CHECK): it processes no file.
# The stack's settings are in the environment of the tool as of the worker's.
licence_check() {
    (set -a; . "$STACK_ENV"; set +a
     $PDFTOOLBOX ${IMPOSER_PDFTOOLBOX_LICENCE_CHECK:---licenseinfo}) >/dev/null 2>&1
}
if licence_check; then
    say "a licence is active: not activating again"
else
    say "activating the licence from parameter $IMPOSER_LICENCE_PARAMETER"
    aws_py secret "$IMPOSER_LICENCE_PARAMETER" | (set -a; . "$STACK_ENV"; set +a
                                                 sh -c "$PDFTOOLBOX_ACTIVATE") \
        || die "the licence activation failed (PDFTOOLBOX_ACTIVATE, parameter $IMPOSER_LICENCE_PARAMETER)"
    licence_check || die "the tool reports no active licence after the activation"
fi

# -- 4. settings ------------------------------------------------------------------------
id -u "$IMPOSER_USER" >/dev/null 2>&1 || \
    useradd --system --home-dir "$IMPOSER_WORK" --shell /sbin/nologin "$IMPOSER_USER"
install -d -m 0750 -o "$IMPOSER_USER" "$IMPOSER_WORK"
install -d -m 0755 -o "$IMPOSER_USER" "$(dirname "$IMPOSER_LOG_FILE")"
[[ -e $IMPOSER_LOG_FILE ]] || install -m 0644 -o "$IMPOSER_USER" /dev/null "$IMPOSER_LOG_FILE"
env_file=$IMPOSER_ETC/imposer.env
{
    echo "# Written by imposer-bootstrap on $(date -u +%FT%TZ): the shared stack's settings"
    echo "# ($STACK_ENV), then this host's. Run the bootstrap again rather than editing."
    grep -v '^[[:space:]]*#' "$STACK_ENV" | grep -v '^[[:space:]]*$' \
        | grep -Ev '^(IMPOSER_HOST_ID|IMPOSER_PDFTOOLBOX|IMPOSER_LOG_GROUP|IMPOSER_LOG_FILE|IMPOSER_WORK_DIR)='
    echo "IMPOSER_HOST_ID=$(uname -n)"
    echo "IMPOSER_PDFTOOLBOX=$PDFTOOLBOX"
    echo "IMPOSER_WORK_DIR=$IMPOSER_WORK"
    echo "IMPOSER_LOG_GROUP=$IMPOSER_LOG_GROUP"
    echo "IMPOSER_LOG_FILE=$IMPOSER_LOG_FILE"
} > "$env_file.new"
chmod 0640 "$env_file.new"
chgrp "$(id -gn "$IMPOSER_USER")" "$env_file.new"
mv "$env_file.new" "$env_file"
say "wrote $env_file"

# -- 5. units and log shipping ------------------------------------------------------------
# The units name a real host's paths; another prefix (a test's) is written into them.
for unit in "$SHARE"/systemd/*.service "$SHARE"/systemd/*.timer; do
    sed -e "s#/opt/imposer/#$IMPOSER_PREFIX/#g" -e "s#/etc/imposer/#$IMPOSER_ETC/#g" \
        -e "s#/var/log/imposer/worker.jsonl#$IMPOSER_LOG_FILE#g" \
        -e "s#^ReadWritePaths=/var/lib/imposer#ReadWritePaths=$IMPOSER_WORK#" \
        "$unit" > "$SYSTEMD_DIR/$(basename "$unit")"
done
sed -e "s#/var/log/imposer/worker.jsonl#$IMPOSER_LOG_FILE#g" "$SHARE/imposer-logs.logrotate" \
    > "$LOGROTATE_DIR/imposer-logs"
"$SYSTEMCTL" daemon-reload
if [[ -n $IMPOSER_LOG_GROUP ]]; then
    install -d "$(dirname "$CWAGENT_CONFIG")"
    sed -e "s#\${IMPOSER_LOG_GROUP}#$IMPOSER_LOG_GROUP#g" \
        -e "s#/var/log/imposer/worker.jsonl#$IMPOSER_LOG_FILE#g" \
        "$SHARE/cloudwatch-agent.json" > "$CWAGENT_CONFIG"
    "$CWAGENT_CTL" -a fetch-config -m ec2 -s -c "file:$CWAGENT_CONFIG" \
        || die "the CloudWatch agent did not take $CWAGENT_CONFIG"
    say "the CloudWatch agent ships $IMPOSER_LOG_FILE to $IMPOSER_LOG_GROUP"
else
    say "IMPOSER_LOG_GROUP is empty: no log shipping, so no metrics or alarms for this host"
fi
"$SYSTEMCTL" enable --now imposer-logs.service
if [[ $IMPOSER_RUNS_TIMERS == true ]]; then
    "$SYSTEMCTL" enable --now imposer-sweep.timer imposer-capacity.timer
    say "this host runs the sweep and capacity timers"
fi

# -- 6. doctor, then the worker ---------------------------------------------------------------
say "imposer doctor"
(set -a; . "$env_file"; set +a; "$VENV/bin/imposer" doctor) >&2 \
    || die "imposer doctor failed: the worker is not started"
"$SYSTEMCTL" enable --now imposer.service
for _ in $(seq "$IMPOSER_START_SECONDS"); do
    if "$SYSTEMCTL" is-active --quiet imposer.service; then
        say "the worker is running"
        exit 0
    fi
    sleep 1
done
die "imposer.service is not active after ${IMPOSER_START_SECONDS} s (journalctl -u imposer)"
