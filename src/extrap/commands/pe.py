"""``extrap pe list``: the positional registry, one line per scheme."""

from __future__ import annotations

from extrap.io import json_text


def register(sub) -> None:
    p = sub.add_parser("pe", help="positional schemes in the registry")
    psub = p.add_subparsers(dest="pe_command", required=True)
    ls = psub.add_parser("list", help="list every scheme with its kind, summary and reference")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--csv", metavar="PATH", help="also write one CSV row per scheme to PATH (atomically)")
    ls.add_argument("--options", action="store_true", help="also list each scheme's options")
    ls.add_argument(
        "--extend", action="store_true", help="list the training-free RoPE extension methods (--extend) instead"
    )
    ls.set_defaults(func=run_list)


def rows() -> list[dict]:
    from extrap import positional

    out = []
    for name in positional.names():
        cls = positional.REGISTRY[name]
        out.append(
            {
                "name": name,
                "kind": cls.kind,
                "summary": cls.summary,
                "reference": cls.reference,
                "options": {o.name: {"default": o.default, "doc": o.doc} for o in cls.OPTIONS},
            }
        )
    from extrap.positional.formula import Formula

    out.append(
        {"name": "<formula>", "kind": "bias", "summary": Formula.summary, "reference": Formula.reference, "options": {}}
    )
    return out


def extension_rows() -> list[dict]:
    """One row per extension method: name, summary, citation, options (default at L_tr = 4096, doc)."""
    from extrap.extend import METHODS

    return [
        {
            "name": name,
            "kind": "extend",
            "summary": cls.summary,
            "reference": cls.citation,
            "options": {o.name: {"default": o.kind(o.default(4096)), "doc": o.doc} for o in cls.OPTIONS},
        }
        for name, cls in METHODS.items()
    ]


def run_list(args) -> int:
    from extrap.commands.args import check_outputs

    check_outputs(args)
    if args.extend:
        return _print_rows(args, extension_rows(), "methods", "defaults at L_tr = 4096")
    return _print_rows(args, rows(), "schemes")


def _print_rows(args, data: list[dict], key: str, note: str = "") -> int:
    if args.csv:
        from extrap.results.tables import pe_table, write_csv

        write_csv(args.csv, pe_table(data))
    if args.json:
        print(json_text({key: data}, default=str))
        return 0
    width = max(len(r["name"]) for r in data)
    for r in data:
        print(f"{r['name']:<{width}}  {r['kind']:<6}  {r['summary']}  [{r['reference']}]")
        if args.options or key == "methods":
            for k, o in r["options"].items():
                print(f"{'':<{width}}    {k}={o['default']}: {o['doc']}")
    if note and not args.json:
        print(f"({note})")
    return 0
