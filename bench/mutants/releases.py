"""Which form of a mutant runs on a release: the patch itself, its variant rebased onto the
release's minor, or none, for a reason the mutant's header declares.

The mutants are written against one release (clusters/versions.py KUBERNETES). On an older minor
the rule a mutant breaks may be the same code with other lines around it, or the same function in
another file (the swap resize refusal was in allocation_manager.go before 1.36 moved it to
handlers.go): its variant for that minor is ``rebased/<minor>/<the mutant's file name>``, with the
mutant's header and one more line saying what differs there:

    # rebased: before 1.36 disallowResizeForSwappableContainers is in allocation_manager.go ...

Where a minor has no such rule (its code path is newer), or a defect of the release hides what the
mutant breaks, the mutant's header says so, one line per reason:

    # not-applicable: 1.34, 1.35, 1.36: <why, in one line>

A provider whose nodes cannot run the mutant's tests to a verdict (the gate accepts their skip
there) is declared the same way, by its name: ``# not-applicable: vm: <why>``; the mutant then
runs on the other provider (the bench's ``--provider``).

Declared data, never guessed at run time: tests/test_mutant_releases.py checks each against the
source of every supported pin (the mutant or its variant applies exactly, else it is declared).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bench.mutants import Mutant
from clusters.vm.k8s_source import Patch, SourceError, read_patch

REBASED = "rebased"  # beside the mutants: rebased/<minor>/<file name>
MINOR = re.compile(r"1\.\d+")
PROVIDERS = ("vm", "kind")  # the providers that build a given release: the bench's and the matrix's
_LINE = re.compile(r"#\s*not-applicable:\s*(.*)")


@dataclass(frozen=True)
class NotApplicable:
    """A mutant the bench does not run on a release, and the header's reason."""

    mutant: Mutant
    release: str
    reason: str

    @property
    def name(self) -> str:
        return self.mutant.name


def minor_of(release: str) -> str:
    """"1.34" of "v1.34.12"."""
    match = re.fullmatch(r"v(1\.\d+)\.\d+", release)
    if not match:
        raise SourceError(f"{release!r} is not a Kubernetes release (want v1.MINOR.PATCH, e.g. v1.37.1)")
    return match.group(1)


def not_applicable(patch: Patch) -> dict[str, str]:
    """The minors and providers a mutant declares itself not applicable to (``# not-applicable:``
    lines before the diff), each with its reason. A line that does not read "MINOR-OR-PROVIDER[,
    ...]: reason" is a SourceError naming the file: a typo must not turn a mutant off silently."""
    out: dict[str, str] = {}
    for line in patch.text.splitlines():
        if line.startswith(("diff ", "--- ")):
            break
        match = _LINE.match(line)
        if not match:
            continue
        minors, sep, reason = match.group(1).partition(": ")
        named = [m.strip() for m in minors.split(",")]
        if not sep or not reason.strip() or not all(MINOR.fullmatch(m) or m in PROVIDERS for m in named):
            raise SourceError(f"{patch.path}: {line!r} does not read '# not-applicable: 1.34, 1.35: <reason>'"
                              f" (or a provider, {' or '.join(PROVIDERS)}, for a minor)")
        for minor in named:
            if minor in out:
                raise SourceError(f"{patch.path}: {minor} is declared not applicable twice")
            out[minor] = reason.strip()
    return out


def variant_path(mutant: Mutant, minor: str) -> Path:
    return mutant.patch.path.parent / REBASED / minor / mutant.patch.path.name


def on(mutant: Mutant, release: str, provider: str | None = None) -> Mutant | NotApplicable:
    """What the bench runs of ``mutant`` on ``release`` (and ``provider``; None: any): its rebased
    variant for the release's minor where there is one, the mutant itself where there is none, or
    NotApplicable where its header says so of the minor or the provider. Both a variant and a
    declaration for one minor contradict each other: a SourceError."""
    minor = minor_of(release)
    declared = not_applicable(mutant.patch)
    variant = variant_path(mutant, minor)
    if minor in declared and variant.exists():
        raise SourceError(f"{mutant.patch.path}: declared not applicable to {minor}, and rebased onto it ({variant}):"
                          " keep one")
    if minor in declared:
        return NotApplicable(mutant, release, declared[minor])
    if provider in declared:
        return NotApplicable(mutant, release, f"on {provider}: {declared[provider]}")
    return Mutant(read_patch(variant)) if variant.exists() else mutant


def variants(directory: Path) -> list[Path]:
    """Every rebased variant under a directory of mutants."""
    return sorted((Path(directory) / REBASED).glob("*/*.patch"))
