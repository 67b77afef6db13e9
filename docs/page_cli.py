"""The command line shared by the docs generators: JSON files in, one markdown page out."""
import argparse
import sys
from pathlib import Path


def page_main(render, description: str, json_help: str, argv=None) -> int:
    """Parse `json... [--out FILE]`, render the page from the JSON files, write it to FILE or stdout."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("json", nargs="+", help=json_help)
    ap.add_argument("--out", type=Path, default=None, help="write here instead of stdout")
    args = ap.parse_args(argv)
    text = render(args.json)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0
