"""Settings: the seed's defaults, IMPOSER_* variables, options winning, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from imposer.errors import ConfigError
from imposer.settings import Settings


class TestSettings:
    def test_seed_defaults(self):
        """Without variables or options, the seed's numbers apply."""
        s = Settings.load({})
        assert (s.slots, s.default_cap, s.heartbeat_seconds, s.lease_ttl_seconds,
                s.defer_seconds, s.sweep_seconds) == (8, 4, 60.0, 600.0, 30.0, 60.0)
        assert s.host_id and s.borrow is False and s.engine == "pdftoolbox"

    def test_environment_then_option(self):
        """An IMPOSER_* variable overrides the default; an explicit option overrides both."""
        env = {"IMPOSER_DEFAULT_CAP": "2", "IMPOSER_HOST_ID": "env-host"}
        assert Settings.load(env).default_cap == 2
        s = Settings.load(env, default_cap=3)
        assert (s.default_cap, s.host_id) == (3, "env-host")

    def test_fractions_of_a_second(self):
        """Durations accept fractions so tests can run them fast."""
        s = Settings.load({"IMPOSER_HEARTBEAT_SECONDS": "0.25",
                           "IMPOSER_LEASE_TTL_SECONDS": "1.5"})
        assert (s.heartbeat_seconds, s.lease_ttl_seconds) == (0.25, 1.5)

    def test_boolean_variables(self):
        """Booleans read the usual spellings."""
        assert Settings.load({"IMPOSER_BORROW": "yes"}).borrow is True
        assert Settings.load({"IMPOSER_BORROW": "0"}).borrow is False

    @pytest.mark.parametrize("env, message", [
        ({"IMPOSER_SLOTS": "eight"}, "IMPOSER_SLOTS: 'eight' is not a valid int"),
        ({"IMPOSER_SLOTS": "0"}, "below the minimum"),
        ({"IMPOSER_ENGINE": "ghostscript"}, "not pdftoolbox or open"),
        ({"IMPOSER_HEARTBEAT_SECONDS": "300"}, "at least 3 x IMPOSER_HEARTBEAT_SECONDS"),
        ({"IMPOSER_POLL_SECONDS": "30"}, "between 0 and 20"),
        ({"IMPOSER_BORROW": "1", "IMPOSER_SLOTS": "1"}, "RESERVE_SLOTS must be smaller"),
        ({"IMPOSER_BORROW": "maybe"}, "IMPOSER_BORROW"),
    ])
    def test_bad_values_name_the_setting(self, env, message):
        """A bad value fails at start with the variable's name and what is wrong."""
        with pytest.raises(ConfigError, match=message):
            Settings.load(env)

    def test_table_names_follow_the_prefix(self):
        """The three tables share one configurable prefix."""
        s = Settings.load({"IMPOSER_TABLE_PREFIX": "prod"})
        assert (s.leases_table, s.jobs_table, s.tenants_table) == \
            ("prod-leases", "prod-jobs", "prod-tenants")


#: The settings README's configuration summary shows; docs/configuration.rst has them all.
SUMMARY = ("IMPOSER_SLOTS", "IMPOSER_DEFAULT_CAP", "IMPOSER_HEARTBEAT_SECONDS",
           "IMPOSER_LEASE_TTL_SECONDS", "IMPOSER_PARK_SECONDS", "IMPOSER_ENGINE",
           "IMPOSER_PDFTOOLBOX", "IMPOSER_JOB_TIMEOUT_SECONDS", "IMPOSER_MAX_ATTEMPTS",
           "IMPOSER_BORROW", "IMPOSER_RESERVE_SLOTS", "IMPOSER_GRACE_SECONDS")
ROOT = Path(__file__).resolve().parents[1]


def settings_table(only: tuple[str, ...] = ()) -> str:
    """The settings table, rendered from the Settings fields (run this to regenerate it):
    every setting for docs/configuration.rst, or those *only* names for README's summary."""
    import textwrap

    import attrs

    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 30 26 14 30", "",
             "   * - Variable", "     - Option", "     - Default", "     - Meaning"]
    for field in attrs.fields(Settings):
        if only and field.metadata["env"] not in only:
            continue
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = "host name"
        default = f"``{default}``" if str(default) else "(empty)"
        meaning = textwrap.wrap(field.metadata["help"], 88)
        lines += [f"   * - ``{field.metadata['env']}``",
                  f"     - ``--{field.name.replace('_', '-')}``", f"     - {default}",
                  f"     - {meaning[0]}"] + [f"       {more}" for more in meaning[1:]]
    return "\n".join(lines) + "\n"


class TestSettingsTables:
    def test_settings_table_matches_the_code(self):
        """docs/configuration.rst lists every setting with its variable, option, default and
        meaning."""
        page = (ROOT / "docs" / "configuration.rst").read_text()
        assert settings_table() in page, "regenerate with tests.test_settings.settings_table()"

    def test_readme_summary_matches_the_code(self):
        """README's configuration summary shows its settings as the code defines them."""
        readme = (ROOT / "README.rst").read_text()
        assert settings_table(SUMMARY) in readme, \
            "regenerate with tests.test_settings.settings_table(SUMMARY)"

    def test_summary_names_only_real_settings(self):
        """Every name of the summary is a setting, so no row silently drops out of it."""
        import attrs

        known = {field.metadata["env"] for field in attrs.fields(Settings)}
        assert set(SUMMARY) <= known
        assert settings_table(SUMMARY).count("   * - ``IMPOSER_") == len(SUMMARY)
