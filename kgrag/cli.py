"""``kgrag`` command line: a thin shell over ``kgrag.api``.

Every user-facing problem arrives as ``KgragError``: one message on stderr,
exit code 2, no traceback, nothing completed thrown away.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from kgrag.console import EXIT_INTERRUPTED, STDIN, query_command
from kgrag.errors import (
    KgragError,
    SpecProblems,
    interrupted,
    one_line,
    stop_on_sigterm,
)

EXIT_USER_ERROR = 2
EXIT_MISMATCH = 1  # a replay whose metrics differ from its bundle's


def _cmd_validate(args: argparse.Namespace) -> int:
    from kgrag.spec import check_spec

    failed = False
    for path in args.specs:
        problems = check_spec(path)
        if problems:
            failed = True
            print("\n".join(one_line(problem) for problem in problems), file=sys.stderr)
        else:
            print(f"{one_line(path)}: ok")
    return EXIT_USER_ERROR if failed else 0


def _cmd_run(args: argparse.Namespace) -> int:
    from kgrag import api
    from kgrag.eval.report import BUILD_COLUMNS, TRAINING_COLUMNS, format_table

    if args.dry_run:
        session = api.open_session(args.spec)
        print(f"plan for {session.spec.name} -> {session.run_dir}")
        total, unknown = 0, 0
        plan = list(api.dry_run(session))
        width = max((len(p.step.name) for p in plan), default=0)
        for planned in plan:
            bound = planned.max_llm_calls
            if not planned.reuse:  # a reused step costs nothing
                total += bound or 0
                unknown += bound is None
            calls = "?" if bound is None else f"≤{bound}"
            action = "reuse" if planned.reuse else "run"
            print(f"  {planned.step.name:<{width}} {planned.step.kind:<12} "
                  f"{planned.step.fingerprint[:12]}  {action:<5}  llm calls {calls}")
        more = (f", plus {unknown} step(s) marked ? (known once chunking has run, or once the "
                "hierarchy is built for module summaries and gate checks)" if unknown else "")
        print(f"at most {total} LLM calls{more} (cached calls cost nothing)")
        return 0
    result = api.run(args.spec, force=tuple(args.force))
    if result.metrics is not None:
        print(f"\n{result.metrics['dataset']}: {result.metrics['n_questions']} questions")
        print(format_table(result.metrics["rows"]))
        if result.metrics["builds"]:
            print("\ngraph builds (cost when built; llm_calls = requests the cache could not "
                  "answer)")
            print(format_table(result.metrics["builds"], BUILD_COLUMNS))
        if result.metrics.get("training"):
            print("\ntraining (cost when trained; stageN_s / _peak_mb / _examples / _loss "
                  "per curriculum stage)")
            print(format_table(result.metrics["training"], TRAINING_COLUMNS))
    print(f"\noutputs: {result.manifest.path.parent}")
    print(f"report: {result.report}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from kgrag import api

    path = api.report(args.outputs, args.output)
    print(f"report: {path} ({path.stat().st_size / 2**20:.1f} MiB, self-contained)")
    return 0


def _cmd_bundle(args: argparse.Namespace) -> int:
    from kgrag import api

    summary = api.bundle(args.spec, args.output, copy_corpus=not args.no_corpus)
    corpus = "corpus copied" if summary.corpus_copied else "corpus by sha256 only"
    print(f"bundle {summary.path}: {summary.size_bytes / 2**20:.2f} MiB, {summary.calls} cache "
          f"entries, {corpus}")
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from kgrag import api
    from kgrag.bundle.compare import PAID, TIMING

    bundle = Path(args.bundle)
    folder = Path(args.dir) if args.dir else Path(f"{bundle.name.split('.')[0]}-replay")
    result = api.replay(bundle, folder, tuple(args.corpus))
    print(f"\nreplayed in {folder}: {result.model_calls} model calls; {result.served} LLM "
          "requests and embeddings answered by the bundle's cache")
    if result.differences is None:
        print("no evaluation in this spec: no metrics to compare")
        return 0
    if result.differences:
        print("metrics.json differs from the bundle's:\n  " + "\n  ".join(result.differences))
        return EXIT_MISMATCH
    print(f"metrics.json: identical to the bundle's apart from timings ({', '.join(TIMING)}) "
          f"and builds' paid calls ({', '.join(PAID)}: answered by the cache here)")
    return 0


def _cmd_cache(args: argparse.Namespace) -> int:
    from kgrag import api

    directory = Path(args.dir) if args.dir else None
    if args.action == "clear":
        print(f"removed {api.cache_clear(directory)} entries")
        return 0
    stats = api.cache_stats(directory)
    print(f"cache: {directory or api.default_cache_dir()}")
    print(f"entries: {stats.entries}  size: {stats.size_bytes / 2**20:.1f} MiB")
    for model, counts in sorted(stats.by_model.items()):
        print(f"  {model:<28} hits {counts.get('hits', 0):>8}  misses {counts.get('misses', 0):>8}")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from kgrag import api

    for model in api.models():
        print(f"{model.name:<20} {model.kind:<9} {model.sha256}  {model.path}")
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    # kgrag.api.init is the same call; the spec package alone loads in a fraction of the
    # time, as for validate
    from kgrag.spec.starter import write_starter

    written = write_starter(Path(args.path), None if args.output is None else Path(args.output),
                            force=args.force)
    found = written.detected
    for note in found.notes:
        print(f"note: {note}")
    questions = ("its own questions" if found.questions_file is None and found.questions
                 else f"questions from {found.questions_file}" if found.questions_file
                 else "no questions file: it builds the index, evaluates nothing")
    print(f"wrote {written.path}: dataset {found.dataset}, {questions}")
    print(f"next: kgrag run {written.path.name}; kgrag query {written.path.name} \"a question\"")
    return 0


def _cmd_graph(args: argparse.Namespace) -> int:
    from kgrag import api

    done = api.export_graph(args.spec, args.output, args.build, args.format)
    nodes = ", ".join(f"{count} {kind}" for kind, count in done.nodes.items())
    edges = ", ".join(f"{count} {kind}" for kind, count in done.edges.items())
    print(f"graph {done.build} ({done.kind}): nodes {nodes or 'none'}; edges {edges or 'none'}")
    for path in done.paths:
        print(f"wrote {path}")
    return 0


def _cmd_gc(args: argparse.Namespace) -> int:
    from kgrag import api

    found = api.gc(args.spec, dry_run=args.dry_run)
    for name, specs in found.kept.items():
        print(f"kept {name}: needed by {', '.join(_shown(s) for s in specs)}")
    for leftover in found.leftovers:
        print(f"  {leftover.path.name:<48} {_size(leftover.size):>10}  {leftover.why}")
    verb = "removed" if found.removed else "would remove (dry run)"
    print(f"{_shown(found.run_dir)}: {verb} {len(found.leftovers)} folder(s), "
          f"{_size(found.size)}")
    return 0


def _size(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"


def _shown(path: Path) -> str:
    """``path`` relative to the current folder when it is under it."""
    return str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgrag", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check specs against the schema")
    p.add_argument("specs", nargs="+")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("run", help="run a spec (reusing valid artefacts)")
    p.add_argument("spec")
    p.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    p.add_argument("--force", action="append", default=[], metavar="STEP",
                   help="rerun STEP (a step name or kind) and everything after it")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("report", help="write one self-contained report.html of a finished "
                       "run: metric bars, sweep curves, graph builds, every question with its "
                       "units' text, the corpus")
    p.add_argument("outputs", metavar="RUN", help="the run's spec, or its folder "
                   "(outputs/<spec name>)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the page to write (default: report.html in the run's folder)")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("query", help="answer a question against the built index, or each "
                       "line of standard input with one load")
    p.add_argument("spec")
    p.add_argument("question", nargs="?", default=STDIN,
                   help="the question; none or '-': read questions from standard input, one "
                        "per line, loading the models and the index once")
    p.add_argument("--strategy", help="a row of the results table (ppr@budget_tokens=2000), "
                   "or a query entry's name: its first row (default: the spec's first row)")
    p.set_defaults(func=query_command)

    p = sub.add_parser("bundle", help="pack a finished run into one file another machine "
                       "can replay: spec, corpus, the cache entries it used, manifest")
    p.add_argument("spec")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the bundle to write (a .tar.gz)")
    p.add_argument("--no-corpus", action="store_true",
                   help="ship only the corpus files' sha256; the replay is given them with "
                        "--corpus")
    p.set_defaults(func=_cmd_bundle)

    p = sub.add_parser("replay", help="rerun a bundle offline in a folder of its own, with no "
                       "model call, and compare its metrics with the bundle's")
    p.add_argument("bundle")
    p.add_argument("--dir", help="folder to replay in: new, empty, or an earlier replay of the "
                   "same bundle, which resumes (default: ./<bundle name>-replay)")
    p.add_argument("--corpus", action="append", default=[], type=Path, metavar="PATH",
                   help="a corpus file or folder for a bundle made with --no-corpus, matched "
                        "by sha256 (repeat for a questions file)")
    p.set_defaults(func=_cmd_replay)

    p = sub.add_parser("cache", help="model-call cache statistics or clearing")
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument("--dir", help="cache folder (default: $KGRAG_CACHE_DIR or ~/.cache/kgrag)")
    p.set_defaults(func=_cmd_cache)

    p = sub.add_parser("init", help="write a commented first spec for a folder of documents, "
                       "a JSON Lines file or a HolisQA domain folder")
    p.add_argument("path", help="the corpus: a folder of documents, a benchmark or documents "
                   ".jsonl file, or a HolisQA domain folder")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the spec to write (default: ./<corpus name>.yaml)")
    p.add_argument("--force", action="store_true", help="overwrite an existing FILE")
    p.set_defaults(func=_cmd_init)

    p = sub.add_parser("graph", help="write a graph build of a spec as GraphML, JSON or CSV "
                       "(for Gephi, Cytoscape, networkx), building it first if needed")
    p.add_argument("spec")
    p.add_argument("build", nargs="?", help="a graph build's name (a sweep's variant by its "
                   "label), or kg for a KGQA corpus's graph (default: the first)")
    p.add_argument("--format", choices=["graphml", "json", "csv"], default="graphml")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the file to write (with --format csv: a folder for nodes.csv and "
                        "edges.csv)")
    p.set_defaults(func=_cmd_graph)

    p = sub.add_parser("gc", help="remove a run's artefact folders its spec no longer reads, "
                       "and temporary folders of killed runs")
    p.add_argument("spec")
    p.add_argument("--dry-run", action="store_true", help="list them with their sizes and stop")
    p.set_defaults(func=_cmd_gc)

    p = sub.add_parser("models", help="bundled models, their files and sha256")
    p.set_defaults(func=_cmd_models)
    return parser


def configure_logging(verbose: bool) -> None:
    """Log records reach stderr from DEBUG with ``--verbose``, else from WARNING, whatever
    level a library sets on its own logger (bm25s sets DEBUG on its own logger: filtering
    by the root logger's level alone let its debug lines through)."""
    level = logging.DEBUG if verbose else logging.WARNING
    handler = logging.StreamHandler()
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("kgrag: %(levelname)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # piped to a log, stdout is block-buffered: step lines would appear only at exit
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    configure_logging(args.verbose)
    stop_on_sigterm()
    try:
        return args.func(args)
    except KgragError as exc:
        lines = exc.problems if isinstance(exc, SpecProblems) else [str(exc)]
        print("kgrag: error: " + "\n".join(one_line(line) for line in lines), file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as stop:
        print(interrupted(stop), file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
