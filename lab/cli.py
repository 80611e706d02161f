"""The ``lab`` command: list, run, check, report, serve and bench.

Exit codes: 0 success (and, for ``run``/``check``, every claim holds); 1 ran but a claim failed or a notebook failed;
2 bad input (unknown method, parameter or value), with nothing written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lab.bench import BENCHES  # a light table: each benchmark is imported when it runs

EXIT_OK, EXIT_CLAIM_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _bad_input(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def _setup() -> None:
    """The process setup of a command that computes (imports torch and the kernels)."""
    from lab import setup_process

    setup_process()


def _parse_params(params: tuple[str, ...]) -> dict[str, str]:
    from lab.checks import ConfigError
    from lab.inputs import parse_params

    try:
        return parse_params(params)
    except ConfigError as exc:
        _bad_input(str(exc))


def _check_out(path: str, label: str = "--out") -> None:
    """An output folder is checked before any work (a run is not thrown away for a path it cannot write)."""
    from lab.config import ConfigError
    from lab.io import check_writable

    try:
        check_writable(path, label, folder=True)
    except ConfigError as exc:
        _bad_input(str(exc))


class _OneLineErrors(click.Group):
    """A group whose usage errors (an unknown option, a missing argument, a value out of an option's range) are one
    line, ``error: ...``, exit 2, like the lab's own bad-input errors, without click's usage block."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx is not None else str(exc))
            sys.exit(EXIT_OK)
        except click.exceptions.NoSuchOption as exc:
            params = exc.ctx.command.get_params(exc.ctx) if exc.ctx else []
            known = sorted({o for p in params for o in p.opts if o[0] == "-"})
            _bad_input(f"{exc.option_name} is not allowed: no such option; allowed: {', '.join(known)}")
        except click.exceptions.MissingParameter as exc:
            usage = exc.ctx.get_usage().replace("Usage: ", "") if exc.ctx else "see --help"
            _bad_input(f"{' '.join(exc.format_message().split())} allowed: {usage}")
        except click.ClickException as exc:
            _bad_input(" ".join(exc.format_message().split()))
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(EXIT_CLAIM_FAILED)
        sys.exit(EXIT_OK)


@click.group(name="lab", cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recurrent-lab")
def cli() -> None:
    """recurrent-lab: ICLR 2026 papers on recurrence, memory and dynamics, on a laptop."""


@cli.command("list")
def list_cmd() -> None:
    """The registered methods as a table."""
    from lab import registry

    rows = [(m.slug, m.paper, m.notebook, ", ".join(m.dashboards) or "-", m.title) for m in registry.methods()]
    heads = ("slug", "paper", "notebook", "dashboards", "title")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


@cli.command()
@click.argument("slug")
@click.option("--profile", "-P", default="quick", show_default=True, help="ci, quick or full.")
@click.option("-p", "params", multiple=True, metavar="FIELD=VALUE", help="Override a Config field (repeatable).")
@click.option("--out", type=click.Path(file_okay=False), default="results", show_default=True,
              help="Folder for the results NetCDF.")
@click.option("--fields", is_flag=True, help="List the method's parameters with their docs and exit.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
def run(slug: str, profile: str, params: tuple[str, ...], out: str, fields: bool, quiet: bool) -> None:
    """Run method SLUG, save its NetCDF under --out and print the claims table.

    Exit 0 when every claim holds, 1 when a claim failed, 2 on bad input.
    """
    from lab import api, registry
    from lab.config import ConfigError, describe_fields

    try:
        method = registry.get(slug)
    except registry.UnknownMethodError as exc:
        _bad_input(str(exc))
    if fields:
        for row in describe_fields(method.config):
            allowed = f"; allowed: {row['allowed']}" if row["allowed"] else ""
            click.echo(f"{row['name']} ({row['type']}, quick default {row['default']!r}{allowed}): {row['doc']}")
        return
    overrides = _parse_params(params)
    _check_out(out)
    try:
        cfg = method.make_config(profile, **overrides)  # validate everything before running or writing
        api.check_machine(cfg)
    except ConfigError as exc:
        _bad_input(str(exc))
    result = api.run(slug, profile, config=cfg, progress=not quiet)
    path = Path(out) / f"{slug}-{profile}.nc"
    result.save(path)
    click.echo(f"{method.title} [{slug}, profile {profile}] in {result.data.attrs['wall_time_s']:.1f} s")
    click.echo(f"config: {cfg.to_json()}")
    click.echo(f"saved: {path}\n")
    click.echo(result.claims.to_text())
    sys.exit(EXIT_OK if result.claims.all_passed else EXIT_CLAIM_FAILED)


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--method", "slug", default=None, metavar="SLUG",
              help="The method the file must be a run of (exit 2 when it names another).")
def check(path: str, slug: str | None) -> None:
    """Re-check the claims of a saved results NetCDF without re-running; its content digest is verified first
    (exit 2 when the file changed after it was written)."""
    from lab import api, registry
    from lab.config import ConfigError

    if slug is not None and slug not in registry.slugs():
        _bad_input(f"--method={slug!r} is not allowed; allowed: one of {', '.join(registry.slugs())}")
    if not Path(path).exists():
        _bad_input(f"no results file at {path}")
    try:
        table = api.check(path, slug)
    except ConfigError as exc:
        _bad_input(f"{path}: {' '.join(str(exc).split())}")
    except (OSError, ValueError) as exc:
        _bad_input(f"{path} is not a lab results file: {' '.join(str(exc).split())}")
    click.echo(table.to_text())
    sys.exit(EXIT_OK if table.all_passed else EXIT_CLAIM_FAILED)


TLS_OPTIONS = ("--tls-ca-file", "--tls-cert", "--tls-key")


def _tls_options(command):
    """The options of a --scheduler on TLS, with Dask's own names: the CA file, this client's certificate and its key
    (the command takes them as ``tls_ca_file``, ``tls_cert``, ``tls_key``)."""
    helps = ("The CA certificate (PEM) that signed the cluster's certificates (with --scheduler tls://...).",
             "This client's certificate (PEM), signed by that CA.",
             "This client's private key (PEM), unless --tls-cert holds it.")
    for name, help_ in reversed(list(zip(TLS_OPTIONS, helps))):
        command = click.option(name, default=None, metavar="FILE", help=help_)(command)
    return command


def _tls_security(ca_file: str | None, cert: str | None, key: str | None):
    """Dask's Security from the --tls-* options (None without them); exit 2 naming the option that is wrong."""
    from lab.config import ConfigError
    from lab.report.execute import tls_security

    try:
        return tls_security(ca_file, cert, key, names=TLS_OPTIONS)
    except ConfigError as exc:
        _bad_input(str(exc))


@cli.command()
@click.argument("slugs", nargs=-1)
@click.option("--profile", "-P", default="quick", show_default=True, help="ci, quick or full.")
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Notebooks executed at once, each in its own process (local runs).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Dask scheduler address (tls://host:8786): execute the notebooks on its workers, one per task.")
@_tls_options
@click.option("--force", is_flag=True, help="Rerun every notebook, also those unchanged since their last good run.")
@click.option("--out", type=click.Path(file_okay=False), default="reports", show_default=True)
def report(slugs: tuple[str, ...], profile: str, jobs: int, scheduler: str | None, tls_ca_file: str | None,
           tls_cert: str | None, tls_key: str | None, force: bool, out: str) -> None:
    """Execute the notebooks with Papermill and write reports/<profile>/index.html with every claims table.

    A method whose notebook, code and profile are unchanged since its last good run is reused, not rerun (--force
    reruns it). With --scheduler the notebooks run on a Dask cluster's workers; the executed notebooks and results
    come back to this machine."""
    from lab import registry

    _setup()
    from lab.config import PROFILE_NAMES, ConfigError
    from lab.report import build_report

    if profile not in PROFILE_NAMES:
        _bad_input(f"--profile={profile!r} is not allowed; allowed: {', '.join(PROFILE_NAMES)}")
    for slug in slugs:
        if slug not in registry.slugs():
            _bad_input(f"unknown method {slug!r}; allowed: one of the known methods: {', '.join(registry.slugs())}")
    _check_out(out)
    security = _tls_security(tls_ca_file, tls_cert, tls_key)
    try:
        summary = build_report(list(slugs) or None, profile=profile, jobs=jobs, out=Path(out), scheduler=scheduler,
                               force=force, security=security)
    except ConfigError as exc:  # no scheduler at --scheduler (nothing was written)
        _bad_input(f"--scheduler: {exc}")
    click.echo(summary.to_text())
    click.echo(f"\nindex: {summary.index}")
    sys.exit(EXIT_OK if summary.all_executed else EXIT_CLAIM_FAILED)


@cli.command()
@click.argument("names", nargs=-1)
@click.option("--port", default=5006, show_default=True, type=click.IntRange(0, 65535))
@click.option("--address", default="127.0.0.1", show_default=True, help="Interface to bind; beyond localhost "
              "only with a login (--basic-auth, $LAB_SERVE_PASSWORD or Panel's $PANEL_OAUTH_* variables).")
@click.option("--basic-auth", metavar="PASSWORD|FILE", help="A password (8+ characters, any user name) or a JSON "
              "file of users and passwords; default: $LAB_SERVE_PASSWORD.")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="HOST:PORT",
              help="A host the browser may name besides the bound address and localhost (repeatable).")
@click.option("--allow-full", is_flag=True, help="Let the pages prepare the full profile (long trainings).")
@click.option("--max-jobs", default=4, show_default=True, type=click.IntRange(1, 64),
              help="Preparations waiting or running at once, all pages together.")
@click.option("--show/--no-show", default=False, help="Open a browser tab.")
@click.option("--list", "list_only", is_flag=True, help="List the dashboards, one line each, and exit.")
def serve(names: tuple[str, ...], port: int, address: str, basic_auth: str | None, allow_origins: tuple[str, ...],
          allow_full: bool, max_jobs: int, show: bool, list_only: bool) -> None:
    """Serve the Panel dashboards (all, or NAMES) with an index page; --list says what each one shows. Beyond
    localhost a login is required; requests naming a host other than the bound address, localhost and
    --allow-origin are refused."""
    from dashboards import APPS, describe_dashboards

    if list_only:
        infos = describe_dashboards()
        width = max(len(d.name) for d in infos)
        for d in infos:
            click.echo(f"{d.name:<{width}}  {d.description} [{', '.join(d.slugs)}]")
        return
    from dashboards import security, serve_apps
    from lab.config import ConfigError

    for name in names:
        if name not in APPS:
            _bad_input(f"unknown dashboard {name!r} is not allowed; allowed: one of the known dashboards: "
                       f"{', '.join(APPS)}")
    try:  # every refusal before anything is bound
        security.check_exposure(address, security.credentials(basic_auth))
        security.allowed_hosts(address, port, allow_origins)
    except ConfigError as exc:
        _bad_input(str(exc))
    serve_apps(list(names) or list(APPS), port=port, address=address, show=show, basic_auth=basic_auth,
               allow_origins=allow_origins, allow_full=allow_full, max_jobs=max_jobs)


@cli.command()
@click.argument("slug")
@click.option("--profile", "-P", default="quick", show_default=True, help="ci, quick or full.")
@click.option("-g", "grid", multiple=True, metavar="FIELD=V1,V2", help="A swept field and its values (repeatable).")
@click.option("-p", "params", multiple=True, metavar="FIELD=VALUE", help="A fixed override (repeatable).")
@click.option("--seeds", default=None, metavar="0-9", help="Run every point over these seeds (0-9, 0,3,7).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Dask scheduler address (tls://host:8786); default: a local cluster.")
@_tls_options
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 256),
              help="Worker processes of the local cluster.")
@click.option("--retries", default=2, show_default=True, type=click.IntRange(0, 100),
              help="Dask retries of a point (a lost worker).")
@click.option("--force", is_flag=True, help="Recompute points already on disk.")
@click.option("--out", type=click.Path(file_okay=False), default="results/sweep", show_default=True)
def sweep(slug: str, profile: str, grid: tuple[str, ...], params: tuple[str, ...], seeds: str | None,
          scheduler: str | None, tls_ca_file: str | None, tls_cert: str | None, tls_key: str | None, workers: int,
          retries: int, force: bool, out: str) -> None:
    """Run SLUG over a grid of Config values and seeds on Dask (a local cluster, or --scheduler for a real one).

    Finished points are kept under OUT/SLUG/ (one file per resolved config) and skipped by a rerun; a failed point
    is reported and the rest run on (exit 1 names the failed points)."""
    import pandas as pd

    _setup()

    from lab import registry
    from lab.config import ConfigError
    from lab.sweep import sweep as run_sweep

    try:
        method = registry.get(slug)
    except registry.UnknownMethodError as exc:
        _bad_input(str(exc))
    from lab.inputs import sweep_inputs

    try:
        axes, fixed, seed_list = sweep_inputs(method, profile, grid, params, seeds)
    except ConfigError as exc:
        _bad_input(str(exc))
    _check_out(out)
    security = _tls_security(tls_ca_file, tls_cert, tls_key)
    try:
        res = run_sweep(slug, axes, seeds=seed_list, profile=profile, base=fixed, scheduler=scheduler,
                        security=security, workers=workers, out=out, force=force, retries=retries)
    except ConfigError as exc:
        _bad_input(str(exc))
    summary = res.summary()
    if not summary.empty:
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            click.echo(summary.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    click.echo(f"\n{len(res.points)} points: {res.computed} computed, {res.skipped} reused from {out}/{slug}, "
               f"{len(res.failures)} failed; {res.elapsed_s:.1f} s")
    if res.failures:
        for f in res.failures:
            point = ", ".join(f"{k}={v}" for k, v in f["point"].items())
            click.echo(f"failed: {point}: {f['error']}", err=True)
        sys.exit(1)


@cli.command()
@click.argument("name")
@click.option("--quick", is_flag=True, help="Small shapes: a smoke run in seconds.")
@click.option("--out", type=click.Path(file_okay=False), default="reports/bench", show_default=True)
def bench(name: str, quick: bool, out: str) -> None:
    """Run benchmark NAME, print its table and save reports/bench/NAME.nc."""
    import importlib

    _setup()

    from lab.results import save

    if name not in BENCHES:
        _bad_input(f"unknown benchmark {name!r}; allowed: one of the known benchmarks: {', '.join(BENCHES)}")
    _check_out(out)
    module, run_name, fmt_name = BENCHES[name]
    mod = importlib.import_module(module)
    ds = getattr(mod, run_name)(quick=quick, progress=True)
    path = save(ds, Path(out) / f"{name}.nc")
    click.echo(getattr(mod, fmt_name)(ds))
    click.echo(f"\nsaved: {path}")


@cli.command("new")
@click.argument("slug")
@click.option("--title", required=True, help="The paper's title.")
@click.option("--paper", required=True, help="Where the paper is: arXiv:XXXX.XXXXX or OpenReview:ID.")
@click.option("--summary", default="", help="One sentence: what the method does.")
def new(slug: str, title: str, paper: str, summary: str) -> None:
    """Write a new method SLUG: its folder (every file role, a runnable placeholder experiment), its notebook, a test
    and its row of the README's method table."""
    from lab.authoring import new_method
    from lab.config import ConfigError

    try:
        paths = new_method(slug, title=title, paper=paper, summary=summary)
    except ConfigError as exc:
        _bad_input(str(exc))
    root = Path(__file__).resolve().parent.parent
    for path in paths:
        click.echo(f"wrote {path.relative_to(root)}")
    click.echo(f"next: lab run {slug} --profile ci; then replace the placeholder experiment (CONTRIBUTING.md)")


@cli.command()
@click.option("--check", is_flag=True, help="Only check; exit 1 when something is out of step.")
@click.option("--method", "methods", multiple=True, help="Only these methods' notebooks (repeatable); default all.")
def sync(check: bool, methods: tuple[str, ...]) -> None:
    """Regenerate what is derived from the registry: each notebook's parameters cell (from its Config) and the
    README's method table. With --check, change nothing and exit 1 when something is out of step."""
    from lab import notebooks as nbs
    from lab import registry

    for slug in methods:
        if slug not in registry.slugs():
            _bad_input(f"--method={slug!r} is not allowed; allowed: one of {', '.join(registry.slugs())}")
    stale, missing = [], []
    for slug in methods or registry.slugs():
        if not registry.get(slug).notebook_path.exists():
            missing.append(registry.get(slug).notebook)  # a method being written: nothing to sync yet
            continue
        if nbs.parameters_in_notebook(slug) != nbs.parameters_source(slug):
            stale.append(registry.get(slug).notebook)
            if not check:
                nbs.sync_parameters(slug)
    readme = registry.NOTEBOOK_DIR.parent / "README.md"
    if not methods and readme.exists() and registry.sync_readme(readme, write=not check):
        stale.append("README.md")
    verb = "out of step" if check else "rewritten"
    click.echo(f"{verb}: {', '.join(stale)}" if stale else "everything in step")
    if missing:
        click.echo(f"no notebook yet: {', '.join(missing)} (write it from a copy of another method's)", err=True)
    sys.exit(EXIT_CLAIM_FAILED if ((stale or missing) and check) else EXIT_OK)


def main() -> None:
    """The console script. The process setup (:func:`lab.setup_process`, which imports torch) waits for the
    commands that compute (run, report, sweep, serve, bench): ``lab list``, ``--help`` and ``--fields`` stay light."""
    cli(prog_name="lab")


if __name__ == "__main__":
    main()
