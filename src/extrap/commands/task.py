"""``extrap task``: retrieval tasks (passkey, line, topic; 004 §5.2) and RULER-style ones: examples, scores."""

from __future__ import annotations

from extrap.commands import args as types
from extrap.commands import task_ruler
from extrap.errors import ExtrapError
from extrap.io import json_text

TASK_CHOICES = ("passkey", "line", "topic")


def register(sub) -> None:
    p = sub.add_parser(
        "task",
        help=f"retrieval tasks: {', '.join(task_ruler.PLAIN_TASKS)} and the RULER-style "
        f"{', '.join(task_ruler.RULER_NAMES)} (sample, score)",
        description="Passkey, line and topic retrieval (004 §5.2) and the RULER-style tasks (Hsieh et al. 2024: "
        f"{', '.join(task_ruler.RULER_NAMES)}): print an example, or score a run's exact-match accuracy by length "
        "and answer depth.",
    )
    tsub = p.add_subparsers(dest="task_command", required=True, parser_class=type(p))
    _register_sample(tsub)
    _register_score(tsub)


def _register_sample(tsub) -> None:
    s = tsub.add_parser(
        "sample",
        help="print one example (prompt and answer)",
        description="Generate one example and print its prompt, answer and statistics.",
    )
    s.add_argument(
        "--task", required=True, type=task_ruler.task_name, help="passkey | line | topic | a RULER-style task"
    )
    s.add_argument(
        "--length",
        required=True,
        type=types.length,
        help="target length of the prompt in tokens (at most 1,048,576; line: 131,072)",
    )
    s.add_argument("--tokenizer", default=None, help="bytes | bpe:V (trained on --corpus); default bytes")
    s.add_argument("--run", help="use this run's tokenizer and corpus")
    s.add_argument("--corpus", default=None, help="filler text: stdlib | text:PATH | ... (default stdlib)")
    s.add_argument(
        "--split", default="validation", choices=types.SPLITS, help="corpus split for the filler (default validation)"
    )
    s.add_argument("--seed", type=types.seed, default=0)
    s.add_argument("--depth", type=float, help="where to put the needle, in [0, 1] (default: random)")
    task_ruler.add_sample_arguments(s)
    s.add_argument("--json", action="store_true", help="print the example as JSON")
    s.add_argument("--csv", metavar="PATH", help="also write the example as one CSV row to PATH (atomically)")
    s.set_defaults(func=run_sample)


def _register_score(tsub) -> None:
    c = tsub.add_parser(
        "score",
        help="exact-match accuracy of a run by length and depth",
        description="Score a trained run on a retrieval task: accuracy per length and per depth "
        "bucket (lost in the middle, 004 Table 9).",
    )
    c.add_argument(
        "run",
        help="run directory, or hf:PATH (a local Hugging Face checkpoint folder, causal LM or T5; needs --task)",
    )
    c.add_argument("--task", type=task_ruler.task_name, help="default: the task the run was trained on")
    c.add_argument(
        "--lengths", type=types.lengths, help="comma-separated prompt lengths in tokens (default: L_tr x 1,2,4,8)"
    )
    c.add_argument("--n", type=types.positive_int, default=50, help="examples per length (default 50)")
    c.add_argument(
        "--score",
        default="greedy",
        choices=("greedy", "rank", "generate"),
        dest="method",
        help="greedy exact match, or ranking the candidate answers by log-likelihood; RULER-style tasks also "
        "generate (greedy generation, RULER's string match)",
    )
    c.add_argument(
        "--temperature",
        type=types.temperature_spec,
        default=None,
        help="none | TAU | TAU_1,...,TAU_R (one per layer) | auto (004 Algorithm 1 per length, extrap.align; "
        "auto:MODE picks its mode, auto:per-layer gives one τ per layer)",
    )
    c.add_argument(
        "--train-length",
        type=types.length,
        dest="train_length",
        help="hf: L_tr (default: the config's; T5 without one: 512)",
    )
    c.add_argument("--buckets", type=types.positive_int, default=5, help="depth buckets (default 5)")
    c.add_argument("--seed", type=types.seed, default=0)
    types.add_rope_arguments(c)
    types.add_extend_argument(c)
    c.add_argument("--corpus", help="filler text (default: the run's corpus)")
    c.add_argument(
        "--split", default="validation", choices=types.SPLITS, help="corpus split for the filler (default validation)"
    )
    c.add_argument("--batch", type=types.positive_int, default=4, help="sequences per forward pass")
    types.add_device(c, default="cpu")
    types.add_dtype(c)
    c.add_argument("--details", action="store_true", help="include one record per example in the JSON")
    c.add_argument("--out", help="also write the JSON result to this file (atomically)")
    c.add_argument("--csv", metavar="PATH", help="also write one CSV row per length to PATH (atomically)")
    task_ruler.add_score_arguments(c)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run_score)


def _tokenizer(args):
    from extrap.data import get_tokenizer, load_corpus, load_tokenizer

    if args.run:
        from extrap.run import RunDir

        if args.tokenizer:
            raise ExtrapError("give --run or --tokenizer, not both")
        config = RunDir(args.run).read_config()
        return load_tokenizer(args.run), args.corpus or config.train.corpus
    spec = args.tokenizer or "bytes"
    corpus = args.corpus or "stdlib"
    if spec == "bytes":
        from extrap.data import ByteTokenizer

        return ByteTokenizer(), corpus
    return get_tokenizer(spec, load_corpus(corpus)), corpus


def run_sample(args) -> int:
    from extrap.tasks import get_filler, make_example, min_length, needs_filler
    from extrap.tasks.generators import check_length

    if args.task not in TASK_CHOICES:  # a RULER-style task
        task_ruler.check_params(args.params)  # before a tokenizer or corpus is read
        types.check_outputs(args, runs=[args.run])
        return task_ruler.run_ruler_sample(args, *_tokenizer(args))
    task_ruler.check_plain(args)
    check_length(args.task, args.length)  # before any tokenizer or filler is read
    types.check_outputs(args, runs=[args.run])
    tok, corpus = _tokenizer(args)
    need = min_length(args.task, tok)
    if args.length < need:  # before reading any filler text
        raise ExtrapError(
            f"{args.task}: length {args.length} is below the minimum of {need} tokens with the "
            f"{tok.name} tokenizer; use a length >= {need}"
        )
    filler = get_filler(corpus, args.split) if needs_filler(args.task) else None
    ex = make_example(args.task, tok, args.length, args.seed, depth=args.depth, filler=filler)
    if args.csv:
        from extrap.results.tables import task_example_table, write_csv

        write_csv(args.csv, task_example_table(ex))
    if args.json:
        print(json_text(ex.to_json()))
        return 0
    print(ex.prompt)
    extra = [(k, v) for k, v in ex.extras() if k in ("n_lines", "key", "n_topics")]
    print(
        f"--- target: {ex.target!r}  answer: {ex.answer!r}  "
        f"depth {ex.depth:.3f} (asked {ex.requested_depth:.3f})  "
        f"{ex.prompt_tokens} prompt tokens of {ex.length} ({tok.name}), answer {ex.target_tokens} tokens"
        + "".join(f"  {k}={v}" for k, v in extra)
    )
    print(f"--- candidates (rank scoring): {', '.join(ex.candidates)}")
    return 0


def run_score(args) -> int:
    if task_ruler.wants_ruler(args):  # --suite ruler, a RULER-style --task, or a run trained on one
        return task_ruler.run_ruler_score(args)
    task_ruler.check_plain(args)
    return _score_task(args)


def _score_task(args) -> int:
    from extrap.results.tables import task_table
    from extrap.tasks import TaskRun, TaskSettings, score_task
    from extrap.tasks.generators import check_length

    types.check_outputs(args, runs=[args.run])
    types.check_extend_flags(args, ("rope", "factor"))  # before the lengths are checked
    types.check_extend_temperature(args)
    for L in (args.lengths or []) if args.task else []:  # before the model is loaded
        check_length(args.task, L)
    run = task_ruler.load_scored(args)  # T5: the prompt goes through the encoder, the answer the decoder
    task = args.task or run.task
    if not task:
        raise ExtrapError(f"{args.run} was not trained on a task; pass --task passkey|line|topic")
    L_tr = run.train_length
    if args.train_length is None:
        types.state_assumed_length(run)
    lengths = args.lengths or [L_tr * 2**k for k in range(4)]
    for L in lengths:
        check_length(task, L)
    task_ruler.check_memory(run, lengths, args.batch)
    corpus = args.corpus or run.corpus
    asked = types.flags(args, ("n", "seed", "method", "temperature", "buckets", "split", "batch", "details"))
    settings = TaskSettings(task, lengths, train_length=L_tr, filler=corpus, progress=not args.json, **asked)
    scored = TaskRun.of(run, score_task(run.model, run.tokenizer, settings), train_length=L_tr)
    return task_ruler.emit(args, scored, task_table, format_report)


def _tau_text(t) -> str:
    if t is None:
        return "-"
    return f"{t:.3g}" if isinstance(t, (int, float)) else ",".join(f"{x:.2f}" for x in t)


def format_report(scored) -> str:
    """A text table of a :class:`extrap.tasks.TaskRun`: accuracy per length, then per depth bucket."""
    report = scored.report
    tau = report.temperature
    tau = list(tau) if isinstance(tau, tuple) else tau
    lines = [
        f"{scored.run}  task={report.task}  score={report.method}  n={report.n}  "
        f"L_tr={scored.train_length}  temperature={'none' if tau is None else tau}"
    ]
    heads = [f"{b.lo:.1f}-{b.hi:.1f}" for b in report.by_depth]
    lines.append(
        f"{'length':>7} {'acc':>6} {'tokens':>8} {'tau':>6}  "
        + " ".join(f"{h:>7}" for h in heads)
        + "   (accuracy by answer depth)"
    )

    def cell(b):
        return f"{b.accuracy:>7.2f}" if b.accuracy is not None else f"{'-':>7}"

    for r in report.results:
        if r.error is not None:
            lines.append(f"{r.length:>7}  failed: {r.error}")
            continue
        lines.append(
            f"{r.length:>7} {r.accuracy:>6.2f} {r.mean_prompt_tokens:>8.0f} {_tau_text(r.temperature):>6}  "
            + " ".join(cell(b) for b in r.by_depth)
        )
    if report.accuracy is not None:
        lines.append(
            f"{'all':>7} {report.accuracy:>6.2f} {'':>8} {'':>6}  " + " ".join(cell(b) for b in report.by_depth)
        )
    return "\n".join(lines)
