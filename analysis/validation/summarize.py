#!/usr/bin/python3
"""validation.md from the compare.json files of a validation (analysis/validation/validate.sh).

    python3 analysis/validation/summarize.py COMPARE_DIR... --out validation.md [--note TEXT]...
                                             [--target-median PCT] [--target-worst PCT] [--check]
                                             [--calibrations SCENARIO=DIR]...
                                             [--steady-spread X] [--recalibrated DIR]...

Each COMPARE_DIR holds one folder per comparison, each with the compare.json of `syncopate
compare SIMULATED MEASURED`. Several comparisons of one pair (scenario, strategy and worker
count: each of repeated measured runs against the simulated run, or against a simulation of its
own on the calibration made just before it) stand for the pair by the one of median error (of an
even count, the upper middle: with one simulated run, the one whose measured run is the lower
middle by its training time); the table gives the range of the measured runs, and of the
simulated runs where they differ, beside it. A table per scenario (in the order of
their first COMPARE_DIR) gives seconds per epoch (the mean over the epochs of each epoch's mean
over the workers) and its split into phases, simulated and measured, and the error of each:
(simulated - measured) / the measured epoch time. The errors summarised, over every scenario
and per scenario: each pair's whole-run epoch time, and every epoch of every pair. The targets
hold over every pair. Beside them, the measurement's own spread: each pair's other measured runs
against its median one, which a prediction exact for the median run would show as its errors,
and how many pairs' simulated epochs lie within their measured runs' range; and, per
--calibrations SCENARIO=DIR (the host profiles that `syncopate calibrate` wrote under DIR), how
far each calibration's step compute lies from their median: the simulated side's own spread.
Last, every comparison (not only each pair's median one) by the steadiness of the calibration
its simulated run used (the host profile that the platform file named in compare.json names):
p90 / p10 of the step's timed parts, within or over the spread at which `syncopate calibrate`
warns (--steady-spread, default its own), with the errors of each group: the comparisons of
every --recalibrated DIR included. Each --recalibrated DIR holds comparisons like COMPARE_DIR's,
of runs simulated on a calibration that calibrate warned of and that validate.sh set aside before
calibrating again: each is set beside the comparison of the same measured run (compare.json's
measured path) on the calibration kept, a paired test of recalibrating.
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys
import tomllib

PHASES = (("compute", "compute_s"), ("comm", "comm_s"), ("idle", "idle_s"))
TARGET_MEDIAN, TARGET_WORST = 0.05, 0.15  # the targets for the epoch time
MISSED = 3  # --check's exit code when the targets are missed
# p90 / p10 of a step's timed parts over which `syncopate calibrate` warns that the machine's
# speed changed while it timed them: kSteadyStepSpread in app/calibrate_fit.hpp.
STEADY_STEP_SPREAD = 1.5


def scenario_of(pair):
    return pair["a"].get("name", "")


def key_of(pair):
    return (scenario_of(pair), pair["a"].get("strategy", ""), pair["a"].get("workers", 0))


def read_comparisons(*compare_dirs):
    """Every compare.json under the directories' folders, in directory then folder order."""
    comparisons = []
    for compare_dir in compare_dirs:
        for name in sorted(os.listdir(compare_dir)):
            path = os.path.join(compare_dir, name, "compare.json")
            if os.path.isfile(path):
                with open(path) as f:
                    comparisons.append(json.load(f))
    return comparisons


def read_pairs(*compare_dirs):
    """[(compare.json dict)] by scenario (in the order the directories first hold them), then
    strategy and worker count, one per pair: the comparison of median error, with
    "measured_runs" and "simulated_runs" (every comparison's seconds per epoch, each sorted)."""
    groups = {}
    order = {}
    for pair in read_comparisons(*compare_dirs):
        order.setdefault(scenario_of(pair), len(order))
        groups.setdefault(key_of(pair), []).append(pair)
    pairs = []
    for key in sorted(groups, key=lambda k: (order[k[0]],) + k[1:]):
        runs = groups[key]
        # By error, largest first: with one simulated run, by measured time, shortest first.
        by_error = sorted(runs, key=lambda p: -whole_run(p)["error"]["total_s"])
        pair = by_error[(len(runs) - 1) // 2]
        pair["measured_runs"] = sorted(seconds_per_epoch(p, "b") for p in runs)
        pair["simulated_runs"] = sorted(seconds_per_epoch(p, "a") for p in runs)
        pairs.append(pair)
    return pairs


def whole_run(pair):
    return next(r for r in pair["rows"] if r["epoch"] is None and r["worker"] is None)


def seconds_per_epoch(pair, side):
    return whole_run(pair)[side]["total_s"] / max(1, len(epoch_means(pair)))


def epoch_means(pair):
    return [r for r in pair["rows"] if r["epoch"] is not None and r["worker"] is None]


def pct(value):
    return "-" if value is None else f"{100 * value:+.1f}%"


def stats_line(label, errors):
    errors = [abs(e) for e in errors if e is not None]
    if not errors:
        return f"| {label} | - | - | 0 |"
    return (f"| {label} | {100 * statistics.median(errors):.1f}% | {100 * max(errors):.1f}% "
            f"| {len(errors)} |")


def pair_row(pair):
    whole = whole_run(pair)
    n = max(1, len(epoch_means(pair)))
    measured = f"{whole['b']['total_s'] / n:.4g}"
    simulated = f"{whole['a']['total_s'] / n:.4g}"
    runs = pair.get("measured_runs", [])
    if len(runs) > 1:
        measured += f" ({min(runs):.4g} - {max(runs):.4g}, {len(runs)} runs)"
    runs = pair.get("simulated_runs", [])
    if len(runs) > 1 and min(runs) != max(runs):
        simulated += f" ({min(runs):.4g} - {max(runs):.4g}, {len(runs)} runs)"
    cells = [pair["a"].get("strategy", "?"), str(pair["a"].get("workers", "?")), str(n),
             simulated, measured, pct(whole["error"]["total_s"])]
    for _, key in PHASES:
        cells.append(f"{whole['a'][key] / n:.3g} / {whole['b'][key] / n:.3g} "
                     f"({pct(whole['error'][key])})")
    cells.append("yes" if pair["bytes"]["equal"] else "**no**")
    return "| " + " | ".join(cells) + " |"


def meets(errors, targets):
    """Whether the errors' median and worst (absolute) are within targets (median, worst)."""
    errors = [abs(e) for e in errors if e is not None]
    return bool(errors) and statistics.median(errors) <= targets[0] and max(errors) <= targets[1]


def verdict(errors, targets):
    errors = [abs(e) for e in errors if e is not None]
    if not errors:
        return "no pairs"
    median, worst = statistics.median(errors), max(errors)
    return (f"median {100 * median:.1f}% (target <= {100 * targets[0]:g}%), worst "
            f"{100 * worst:.1f}% (target <= {100 * targets[1]:g}%): "
            f"{'targets met' if meets(errors, targets) else 'targets MISSED'}")


def pair_errors(pairs):
    return [whole_run(p)["error"]["total_s"] for p in pairs]


def repeat_errors(pairs):
    """Each pair's other measured runs against its median one, (run - median) / median: the
    errors that a prediction exact for the median run would show against them."""
    errors = []
    for pair in pairs:
        runs = pair.get("measured_runs", [])
        middle = (len(runs) - 1) // 2
        errors += [(run - runs[middle]) / runs[middle] for k, run in enumerate(runs)
                   if k != middle]
    return errors


def within_range(pairs):
    """(pairs whose simulated seconds per epoch lie within their measured runs' range, pairs
    measured more than once)."""
    repeated = [p for p in pairs if len(p.get("measured_runs", [])) > 1]
    inside = [p for p in repeated
              if min(p["measured_runs"]) <= seconds_per_epoch(p, "a") <= max(p["measured_runs"])]
    return len(inside), len(repeated)


def spread_lines(pairs, targets, calibrations=(), steadiness=(),
                 steady_spread=STEADY_STEP_SPREAD):
    """The measurement's own spread, beside the model's errors: the measured runs' (none for
    single runs), the calibrations' (none for fewer than two per scenario) and the errors by the
    calibrations' steadiness (calibration_steadiness)."""
    lines = []
    errors = repeat_errors(pairs)
    if errors:
        inside, repeated = within_range(pairs)
        lines += ["- each pair's other measured runs against its median run, as (run - median) "
                  "/ median: the errors of a prediction exact for the median run: "
                  f"{verdict(errors, targets)}",
                  f"- the simulated epoch lies within its measured runs' range in {inside} of "
                  f"{repeated} pairs"]
    lines += calibration_lines(calibrations)
    lines += steadiness_lines(steadiness, steady_spread)
    return ["", "## The measurement's own spread", ""] + lines if lines else []


# The line of a host profile (app/calibrate_write.cpp) that gives a step's measured compute: the
# median of its timed parts, their p10 and p90.
NUMBER = r"([0-9.eE+-]+)"
STEP_LINE = re.compile(r"^# every pass x: the median of a step's timed parts \(" + NUMBER +
                       r" s; p10 " + NUMBER + ", p90 " + NUMBER + r"\)")


def profile_step(path):
    """(median, p10, p90) seconds of a step's timed parts in the host profile at path, or None
    for a profile without the line (one not written by calibrate)."""
    with open(path) as f:
        for line in f:
            match = STEP_LINE.match(line)
            if match:
                return tuple(float(group) for group in match.groups())
    return None


def profile_steps(directory):
    """(median, p10, p90) of every host profile under directory that has them, in path order,
    but those of calibrations set aside (validate.sh's warned-N folders)."""
    paths = sorted(glob.glob(os.path.join(directory, "**", "profiles", "*.toml"), recursive=True))
    paths = [path for path in paths if not any(
        part.startswith("warned-") for part in os.path.relpath(path, directory).split(os.sep))]
    return [step for step in map(profile_step, paths) if step is not None]


def calibrated_steps(directory):
    """The median step compute (seconds) of every host profile under directory, in path order."""
    return [median for median, _, _ in profile_steps(directory)]


def platform_step(platform):
    """(median, p10, p90) of the host profile that the platform file names (its profile key,
    profiles/NAME.toml beside it), or None where either is missing or the profile lacks them."""
    try:
        with open(platform, "rb") as f:
            name = tomllib.load(f).get("profile", "")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    path = os.path.join(os.path.dirname(platform), "profiles", f"{name}.toml")
    return profile_step(path) if name and os.path.isfile(path) else None


def platform_spread(platform):
    """p90 / p10 of a step's timed parts in the calibration of the platform file, or None."""
    step = platform_step(platform)
    return step[2] / step[1] if step else None


def calibration_steadiness(comparisons):
    """[(spread, scenario, [errors])]: per calibration that simulated runs of the comparisons
    used (the host profile of the platform file that compare.json names for the simulated side,
    platform_step, in the order first used) and scenario, the p90 / p10 of its step's timed parts and the
    epoch-time errors of the comparisons simulated on it. Platforms without such a profile are
    left out."""
    spreads = {}
    runs = {}
    for comparison in comparisons:
        platform = comparison["a"].get("platform", "")
        if platform not in spreads:
            spreads[platform] = platform_spread(platform)
        if spreads[platform] is not None:
            key = (platform, scenario_of(comparison))
            runs.setdefault(key, []).append(whole_run(comparison)["error"]["total_s"])
    return [(spreads[platform], scenario, errors) for (platform, scenario), errors in runs.items()]


def steadiness_lines(steadiness, steady_spread=STEADY_STEP_SPREAD):
    """Comparisons grouped by their calibration's steadiness (calibration_steadiness): how well
    runs simulated on a calibration that calibrate warned of (over steady_spread) were
    predicted, against the rest; over every scenario and, for more than one, per scenario."""
    if not steadiness:
        return []
    spreads = [spread for spread, _, _ in steadiness]
    widest, _, widest_errors = max(steadiness, key=lambda entry: entry[0])
    lines = ["- the calibrations' steadiness: a step's timed parts spread "
             f"{statistics.median(spreads):.2f}x from p10 to p90 at the median over "
             f"{len(spreads)} calibrations, {widest:.2f}x at widest (the error of the runs "
             f"simulated on it: {', '.join(pct(e) for e in widest_errors)}); `syncopate "
             f"calibrate` warns over {steady_spread:g}x", "",
             "| runs simulated on a calibration | calibrations | median abs error | worst abs "
             "error | runs |", "|---|---|---|---|---|"]
    scenarios = list(dict.fromkeys(scenario for _, scenario, _ in steadiness))
    for scenario in [None] + (scenarios if len(scenarios) > 1 else []):
        for label, steady in ((f"within {steady_spread:g}x", True),
                              (f"over {steady_spread:g}x (warned of)", False)):
            group = [errors for spread, of, errors in steadiness
                     if (spread <= steady_spread) == steady and scenario in (None, of)]
            errors = [abs(e) for each in group for e in each]
            figures = (f"{100 * statistics.median(errors):.1f}% | {100 * max(errors):.1f}%"
                       if errors else "- | -")
            lines.append(f"| {scenario + ', ' if scenario else ''}{label} | {len(group)} | "
                         f"{figures} | {len(errors)} |")
    return lines


def recalibrated_runs(kept, set_aside):
    """[(comparison, [comparisons])]: each kept comparison whose measured run (compare.json's
    measured path) was also compared with a simulation on calibrations set aside, with those, in
    the kept comparisons' order."""
    aside = {}
    for comparison in set_aside:
        aside.setdefault(comparison["b"].get("path"), []).append(comparison)
    return [(comparison, aside[comparison["b"].get("path")]) for comparison in kept
            if comparison["b"].get("path") in aside]


def recalibration_lines(recalibrated):
    """The errors of runs simulated on the calibration kept against the same measured runs
    simulated on the calibrations that calibrate warned of before it (recalibrated_runs)."""
    if not recalibrated:
        return []

    def error(comparison):
        return whole_run(comparison)["error"]["total_s"]

    kept = [abs(error(comparison)) for comparison, _ in recalibrated]
    aside = [abs(error(other)) for _, others in recalibrated for other in others]
    closer = sum(abs(error(comparison)) < abs(error(other))
                 for comparison, others in recalibrated for other in others)

    def figures(errors):
        return (f"{100 * statistics.median(errors):.1f}% at the median, "
                f"{100 * max(errors):.1f}% at worst")

    def cell(comparison):
        spread = platform_spread(comparison["a"].get("platform", ""))
        return (f"{spread:.2f}x " if spread else "") + pct(error(comparison))

    lines = ["", "## Recalibrated runs", "",
             f"- {len(recalibrated)} measured run(s) simulated on the calibration kept and on "
             f"the {len(aside)} that `syncopate calibrate` warned of before it (set aside, then "
             f"calibrated again), each compared with the same measured run: on the kept ones "
             f"{figures(kept)}; on the ones set aside {figures(aside)}; the "
             f"kept calibration came closer in {closer} of {len(aside)} comparisons",
             "- a calibration's p90 / p10 of a step's timed parts, then the error of the epoch "
             "time", "",
             "| scenario | strategy | workers | measured run | s/epoch | kept calibration | "
             "calibrations set aside |", "|---|---|---|---|---|---|---|"]
    for comparison, others in recalibrated:
        run = os.path.basename(comparison["b"].get("path", "").rstrip("/"))
        lines.append(f"| {scenario_of(comparison)} | {comparison['a'].get('strategy', '?')} | "
                     f"{comparison['a'].get('workers', '?')} | {run} | "
                     f"{seconds_per_epoch(comparison, 'b'):.4g} | {cell(comparison)} | "
                     f"{', '.join(cell(other) for other in others)} |")
    return lines


def calibration_lines(calibrations):
    """calibrations: [(scenario, [step seconds])]: each one's deviations from their median."""
    lines = []
    for scenario, steps in calibrations:
        if len(steps) < 2:
            continue
        middle = statistics.median(steps)
        deviations = [abs(s / middle - 1) for s in steps]
        lines.append(f"- {scenario}, the simulated side: {len(steps)} calibrations put a step's "
                     f"compute at {1e3 * min(steps):.4g} to {1e3 * max(steps):.4g} ms (median "
                     f"{1e3 * middle:.4g} ms), {100 * statistics.median(deviations):.1f}% from "
                     f"that median at the median and {100 * max(deviations):.1f}% at worst")
    return lines


def scenarios_of(pairs):
    """The scenarios' names in the pairs' order, each once."""
    return list(dict.fromkeys(scenario_of(p) for p in pairs))


def summarize(pairs, notes=(), targets=(TARGET_MEDIAN, TARGET_WORST), calibrations=(),
              steadiness=(), steady_spread=STEADY_STEP_SPREAD, recalibrated=()):
    scenarios = scenarios_of(pairs)
    md = [f"# Validation: simulated vs measured, {', '.join(scenarios)}", ""]
    md += [f"- {n}" for n in notes]
    md += ["- seconds per epoch: the mean over the epochs of each epoch's mean over the workers;",
           "  phases as simulated / measured (error), errors as a share of the measured epoch"]
    header = ["strategy", "workers", "epochs", "simulated s/epoch", "measured s/epoch", "error"]
    header += [f"{label} s/epoch" for label, _ in PHASES] + ["bytes equal"]
    for scenario in scenarios:
        md += ["", f"## {scenario}", "", "| " + " | ".join(header) + " |",
               "|" + "---|" * len(header)]
        md += [pair_row(p) for p in pairs if scenario_of(p) == scenario]
    per_pair = pair_errors(pairs)
    epoch_errors = [r["error"]["total_s"] for p in pairs for r in epoch_means(p)]
    md += ["", "## Errors of the epoch time", "",
           f"- per pair (whole run): {verdict(per_pair, targets)}",
           f"- per epoch (every epoch of every pair): {verdict(epoch_errors, targets)}"]
    if len(scenarios) > 1:
        md += [f"- {scenario}, per pair: "
               f"{verdict(pair_errors([p for p in pairs if scenario_of(p) == scenario]), targets)}"
               for scenario in scenarios]
    md += ["", "| error of | median abs | worst abs | count |", "|---|---|---|---|",
           stats_line("epoch time, per pair", per_pair),
           stats_line("epoch time, per epoch", epoch_errors)]
    for label, key in PHASES:
        md.append(stats_line(f"{label}, per pair (share of the epoch)",
                             [whole_run(p)["error"][key] for p in pairs]))
    repeats = repeat_errors(pairs)
    if repeats:
        md.append(stats_line("a measured run against its pair's median run", repeats))
    mismatched = [p for p in pairs if not p["bytes"]["equal"]]
    md += ["", "Bytes: " + ("equal in every pair." if not mismatched else
                            f"{len(mismatched)} pair(s) differ.")]
    md += spread_lines(pairs, targets, calibrations, steadiness, steady_spread)
    md += recalibration_lines(recalibrated)
    return "\n".join(md) + "\n"


def percent(text):
    """A target in percent: a number >= 0, with or without a trailing %."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"'{text}': allowed: a percentage >= 0, e.g. 5 or 5%")
    return value


def spread_threshold(text):
    """A p90 / p10 threshold: a number >= 1, as calibrate's --steady-spread."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"'{text}': allowed: a number >= 1, e.g. 1.5")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compare_dirs", nargs="+", metavar="compare_dir")
    parser.add_argument("--out", required=True)
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--target-median", type=percent, default=100 * TARGET_MEDIAN,
                        metavar="PCT")
    parser.add_argument("--target-worst", type=percent, default=100 * TARGET_WORST,
                        metavar="PCT")
    parser.add_argument("--calibrations", action="append", default=[], metavar="SCENARIO=DIR",
                        help="a scenario's calibrations: the host profiles under DIR")
    parser.add_argument("--steady-spread", type=spread_threshold, default=STEADY_STEP_SPREAD,
                        metavar="X", help="group runs by their calibration's p90 / p10 within "
                        f"or over X (default {STEADY_STEP_SPREAD:g}, calibrate's)")
    parser.add_argument("--recalibrated", action="append", default=[], metavar="DIR",
                        help="comparisons of runs simulated on calibrations set aside")
    parser.add_argument("--check", action="store_true",
                        help=f"exit {MISSED} when the per-pair errors miss the targets or bytes "
                             "differ")
    args = parser.parse_args(argv)
    targets = (args.target_median / 100, args.target_worst / 100)
    for compare_dir in args.compare_dirs + args.recalibrated:
        if not os.path.isdir(compare_dir):
            print(f"summarize: {compare_dir}: no such directory", file=sys.stderr)
            return 2
    calibrations = []
    for given in args.calibrations:
        scenario, _, directory = given.partition("=")
        if not scenario or not os.path.isdir(directory):
            print(f"summarize: --calibrations '{given}': allowed: SCENARIO=DIR, DIR a directory",
                  file=sys.stderr)
            return 2
        calibrations.append((scenario, calibrated_steps(directory)))
    pairs = read_pairs(*args.compare_dirs)
    kept, set_aside = read_comparisons(*args.compare_dirs), read_comparisons(*args.recalibrated)
    steadiness = calibration_steadiness(kept + set_aside)
    if not pairs:
        print(f"summarize: {' '.join(args.compare_dirs)}: no compare.json in their folders",
              file=sys.stderr)
        return 2
    with open(args.out, "w") as f:
        f.write(summarize(pairs, args.note, targets, calibrations, steadiness,
                          args.steady_spread, recalibrated_runs(kept, set_aside)))
    print(f"validation written to {args.out} ({len(pairs)} pairs)")
    print(f"per pair: {verdict(pair_errors(pairs), targets)}")
    if not args.check:
        return 0
    differ = [f"{scenario_of(p)} {p['a'].get('strategy', '?')} at {p['a'].get('workers', '?')}"
              for p in pairs if not p["bytes"]["equal"]]
    if differ:
        print(f"summarize: bytes differ in {', '.join(differ)}", file=sys.stderr)
    if differ or not meets(pair_errors(pairs), targets):
        return MISSED
    return 0


if __name__ == "__main__":
    sys.exit(main())
