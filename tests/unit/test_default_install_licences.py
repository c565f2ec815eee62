"""The default install is Apache-2.0-compatible: no AGPL or GPL distribution in it.

The default install is the dependency closure of the ``ultimate-rag`` distribution without extras,
computed from the installed metadata (``Requires-Dist``, markers evaluated for this interpreter and
platform, and the extras each requirement asks of its dependency, such as ``psycopg[binary,pool]``).
Every distribution in it is classified by its licence metadata: ``License-Expression`` (SPDX), else
the ``License :: `` classifiers, else the ``License`` field. Decision (docs/formats.md, "Licences"):

* AGPL and GPL (any version) fail, unless the distribution also offers a licence that is not
  (``MIT OR GPL-2.0``, or classifiers that list both);
* LGPL passes: the LGPL allows use by a program under another licence as long as the library can
  be replaced, which a separately installed Python distribution always can (psycopg, chardet);
  MPL-2.0 passes (file-level copyleft, unmodified files);
* a distribution whose metadata names no licence fails unless ``CHECKED_BY_HAND`` records what
  its licence file says.

The optional extras (``[pymupdf]``: AGPL-3.0, ``[backends]``, ``[test]``) are not part of it, and
the check shows that: PyMuPDF is installed here (for the tests) but is not in the closure.
"""

from __future__ import annotations

import re
from importlib.metadata import Distribution, PackageNotFoundError, distribution

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# Distributions whose metadata names no licence, with the licence their files carry.
CHECKED_BY_HAND: dict[str, str] = {}
_COPYLEFT = re.compile(r"\b(A?GPL|GNU (Affero )?General Public)", re.IGNORECASE)
_LESSER = re.compile(r"\b(LGPL|Lesser|Library General Public)", re.IGNORECASE)


def default_closure(root: str = "ultimate-rag") -> dict[str, Distribution]:
    """Every installed distribution a plain ``pip install root`` brings, by canonical name."""
    found: dict[str, Distribution] = {}
    asked: dict[str, set[str]] = {}
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if key in asked and extras <= asked[key]:
            continue
        asked.setdefault(key, set()).update(extras)
        try:
            dist = found.get(key) or distribution(name)
        except PackageNotFoundError as exc:
            raise AssertionError(f"{name} is required but not installed") from exc
        found[key] = dist
        for text in dist.requires or ():
            requirement = Requirement(text)
            if _applies(requirement, asked[key]):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return found


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    environment = {key: str(value) for key, value in default_environment().items()}
    return any(requirement.marker.evaluate({**environment, "extra": extra}) for extra in {"", *extras})


def licence_of(dist: Distribution) -> list[str]:
    """The licence alternatives a distribution declares (any one may be chosen)."""
    meta = dist.metadata.json  # the core metadata as a dict (keys lower case, lists for repeated fields)
    expression = str(meta.get("license_expression") or "")
    if expression:  # alternatives at the top level only: "MPL-2.0 AND (Apache-2.0 OR MIT)" is one
        return [expression] if "(" in expression else [part.strip() for part in re.split(r"\s+OR\s+", expression)]
    classifiers = [c.split("::")[-1].strip() for c in meta.get("classifier") or () if c.startswith("License ::")]
    classifiers = [c for c in classifiers if c not in ("OSI Approved", "")]
    if classifiers:
        return classifiers
    field = str(meta.get("license") or "").strip()
    if field and field.upper() != "UNKNOWN":
        return [field.splitlines()[0][:120]]
    name = canonicalize_name(str(meta["name"]))
    return [CHECKED_BY_HAND[name]] if name in CHECKED_BY_HAND else []


def is_copyleft(licence: str) -> bool:
    """AGPL or GPL; the LGPL is not (module docstring)."""
    return bool(_COPYLEFT.search(licence)) and not _LESSER.search(licence)


def test_the_closure_follows_markers_and_extras_and_leaves_out_the_optional_engine() -> None:
    closure = default_closure()
    assert {"pypdfium2", "pypdf", "psycopg", "psycopg-binary", "psycopg-pool"} <= set(closure)
    assert "pymupdf" not in closure  # the AGPL engine is an extra
    assert "boto3" not in closure and "pytest" not in closure  # [backends] and [test] are extras too
    distribution("pymupdf")  # and yet it is installed here: the closure is not "what is installed"


def test_no_distribution_of_the_default_install_is_agpl_or_gpl() -> None:
    unknown, copyleft = [], []
    for name, dist in sorted(default_closure().items()):
        alternatives = licence_of(dist)
        if not alternatives:
            unknown.append(name)
        elif all(is_copyleft(alt) for alt in alternatives):
            copyleft.append(f"{name} {dist.version}: {' OR '.join(alternatives)}")
    assert not copyleft, f"AGPL/GPL distributions in the default install: {copyleft}"
    assert not unknown, f"no licence in the metadata of {unknown}: check their licence files, add to CHECKED_BY_HAND"


def test_the_rule_tells_copyleft_from_lesser_and_dual_licences() -> None:
    assert is_copyleft("AGPL-3.0-or-later") and is_copyleft("GNU Affero General Public License v3")
    assert is_copyleft("GPL-2.0-only") and is_copyleft("GNU General Public License v3 (GPLv3)")
    assert not is_copyleft("LGPL-3.0-only") and not is_copyleft("GNU Lesser General Public License v3 (LGPLv3)")
    assert not is_copyleft("GNU Library or Lesser General Public License (LGPL)")
    assert not is_copyleft("Apache-2.0") and not is_copyleft("MPL-2.0") and not is_copyleft("BSD-3-Clause")
    pymupdf = licence_of(distribution("pymupdf"))
    assert pymupdf and all(is_copyleft(alt) for alt in pymupdf), pymupdf  # the check does catch it
