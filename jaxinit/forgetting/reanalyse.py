"""``python -m jaxinit.forgetting.reanalyse RUN_DIR [--fit-on FIT_DIR] [--rule NAME]``: a finished design's
verdicts again from its saved horizons, without training (`jaxinit.forgetting.clock_run.reanalyse`)."""
from __future__ import annotations

from typing import Sequence

from jaxinit.forgetting.design import RULES


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m jaxinit.forgetting.reanalyse RUN_DIR [--fit-on FIT_DIR] [--rule NAME]``: the verdicts of a finished
    design again,
    from its points' saved horizons.json (no training): summary.json's "design", table.md and the design figures
    rewritten; with ``--fit-on``, also the out-of-sample test (`design_predict`): each candidate clock's curve
    fitted on FIT_DIR's trained cells predicting RUN_DIR's."""
    import argparse
    import sys
    parser = argparse.ArgumentParser(prog="python -m jaxinit.forgetting.reanalyse", description=main.__doc__)
    parser.add_argument("run_dir")
    parser.add_argument("--fit-on", dest="fit_on", default=None, help="a finished design whose curves predict these")
    parser.add_argument("--rule", default=None, choices=RULES,
                        help="the verdicts under another predictor than the design's own: printed, and kept in "
                             "summary.json under design_by_rule (the design's own verdicts stay)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    from jaxinit.forgetting.clock_run import reanalyse
    try:
        print("\n".join(str(p) for p in reanalyse(args.run_dir, args.fit_on, args.rule)))
    except (OSError, ValueError, KeyError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
