"""Match rules.yaml signatures against a log's exceptions and lines, and rank the matches."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvdoctor.base.literals import any_of
from kvdoctor.explain.log_lines import LogLine
from kvdoctor.explain.tracebacks import MAX_CONTINUATION, ExceptionChain, LoggedException, continued
from kvdoctor.model.report import SEVERITY_ORDER
from kvdoctor.rules.loader import Rule, Signature


@dataclass(frozen=True)
class SignatureMatch:
    """One place in the log where a rule's signature matched."""

    rule: Rule
    signature: Signature
    line: int
    """Log line of the matched exception or line."""
    text: str
    """The matched exception summary or log line."""
    exception: LoggedException | None = None
    depth: int | None = None
    """Position in its chain, 0 = innermost cause; None for a plain log line."""
    values: tuple[tuple[str, str], ...] = ()
    """The signature's named groups: what the log says in the places the rule's cause names."""

    @property
    def role(self) -> str:
        return self.signature.role

    def rank(self) -> tuple:
        """Sort key for choosing the primary cause: root before wrapper, errors first, a match inside an
        exception before a plain line, the innermost cause first, then the earliest in the log."""
        return (
            self.role != "root",
            -SEVERITY_ORDER[self.rule.severity],
            self.exception is None,
            self.depth if self.depth is not None else 0,
            self.exception is not None and not self.exception.frames,
            self.line,
        )


def match_signatures(rules: list[Rule], chains: list[ExceptionChain], lines: list[LogLine]) -> list[SignatureMatch]:
    """Every (rule, place) match; exceptions are matched with their frames and compile excerpts."""
    pairs = [(rule, signature) for rule in rules for signature in rule.signatures]
    if not pairs:
        return []
    matches: list[SignatureMatch] = []
    in_exceptions: set[tuple[str, int]] = set()
    candidates = _candidates(pairs)
    exception_lines = {exception.line for chain in chains for exception in chain.exceptions}
    keyless = {id(signature) for _, signature in candidates.always}
    for chain in chains:
        for depth, exception in enumerate(chain.exceptions):
            text = exception.searchable()
            # hard-wrapped logs cut words at the terminal width ("KV cach" / "e is needed"): try unwrapped too
            unwrapped = exception.message.replace("\n", "") if "\n" in exception.message else None
            possible = {id(signature) for _, signature in candidates(text) + (candidates(unwrapped) if unwrapped else [])}
            for rule, signature in pairs:
                if id(signature) not in possible:
                    continue
                found = signature.search(text) or (unwrapped and signature.search(unwrapped))
                if found:
                    matches.append(SignatureMatch(rule, signature, exception.line, exception.summary, exception, depth,
                                                  _values(found)))
                    in_exceptions.add((rule.id, exception.line))
    line_candidates: dict[int, list] = {}

    def of_line(index: int) -> list:
        found = line_candidates.pop(index, None)  # each line's candidates are computed once
        return candidates(lines[index].text) if found is None else found

    for index, line in enumerate(lines):
        text = line.text
        matched: set[str] = set()  # rules this line matched alone (its joined form is tried for the others)
        own = of_line(index)
        for rule, signature in own:
            if (rule.id, line.number) in in_exceptions:
                continue
            found = signature.search(text)
            if found:
                matched.add(rule.id)
                matches.append(SignatureMatch(rule, signature, line.number, text.strip(), values=_values(found)))
        if (line.level in _NOT_CONTINUED and not _wrapped_record(lines, index)) or line.number in exception_lines:
            continue
        joined = continued(lines, index)  # a message wrapped over several lines, matched as one
        if joined is None:
            continue
        # the signatures a word of the head or of a continuation line keys: each line's own candidates, kept for
        # its turn (a line costs one candidate look-up, joined or not)
        following = range(index + 1, min(index + 1 + MAX_CONTINUATION, len(lines)))
        for follower in following:
            if follower not in line_candidates:
                line_candidates[follower] = candidates(lines[follower].text)
        pool = own + [pair for follower in following for pair in line_candidates[follower]]
        tried: set[int] = set(keyless)  # a signature with no literal to key it is not tried on every join
        for rule, signature in pool:
            if id(signature) in tried or rule.id in matched or (rule.id, line.number) in in_exceptions:
                continue
            tried.add(id(signature))
            found = signature.search(joined)
            if found:
                matches.append(SignatureMatch(rule, signature, line.number, joined, values=_values(found)))
    return matches


_NOT_CONTINUED = ("INFO", "DEBUG")
"""Levels whose lines are not joined with their continuation: INFO and DEBUG chatter (unless a wrap split one)."""


def _wrapped_record(lines: list[LogLine], index: int) -> bool:
    """An INFO / DEBUG record whose next line is its rest without a header (a terminal or a paste wrapped it)."""
    following = lines[index + 1] if index + 1 < len(lines) else None
    return following is not None and following.level is None and following.stream == lines[index].stream \
        and following.number == lines[index].number + 1


def _candidates(pairs):
    """text -> the (rule, signature) pairs that may match it: from the text's words (one look-up each), not a
    regex per signature; in the text's word order, so the match order never depends on the hash seed."""
    by_word, substring, always, substring_filter = _indexed(pairs)

    def candidates(text: str) -> list:
        found = list(always)
        for word in dict.fromkeys(_WORDS.findall(text)):
            found.extend(by_word.get(word, ()))
        if substring_filter is not None and substring_filter.search(text):
            found.extend((rule, signature) for rule, signature, literals in substring
                         if any(literal in text for literal in literals))
        return found

    candidates.always = always
    return candidates


_WORDS = re.compile(r"\w{4,}")
_INDEXES: dict[tuple[int, ...], tuple] = {}
"""The prefilter of each set of (rule, signature) pairs read in this process, keyed by the pairs' identities (the
loaded rules are cached, so a process that explains many logs indexes their signatures once)."""


def _indexed(pairs):
    key = tuple(id(item) for pair in pairs for item in pair)
    if key not in _INDEXES:
        by_word, substring, always = _prefilter(pairs)
        literals = sorted({literal for _, _, group in substring for literal in group})
        substring_filter = any_of(literals) if literals else None
        if len(_INDEXES) >= 4:
            _INDEXES.clear()
        # the pairs are kept with their index: their objects stay alive, so no other object takes their ids
        _INDEXES[key] = (by_word, substring, always, substring_filter, list(pairs))
    return _INDEXES[key][:4]


def _prefilter(pairs):
    """Index signatures by a whole word every match contains; those without one by a required substring. Reads
    only the patterns' text (their literals cached on disk), so a pattern is compiled only if a line may match it."""
    by_word: dict[str, list] = {}
    substring, always = [], []
    known = cached_literals([signature.source for _, signature in pairs])
    for rule, signature in pairs:
        literals = known[signature.source]
        if literals is None:
            always.append((rule, signature))
            continue
        words = [_interior_word(literal) for literal in literals]
        if all(words):
            for word in dict.fromkeys(words):
                by_word.setdefault(word, []).append((rule, signature))
        else:
            substring.append((rule, signature, literals))
    return by_word, substring, always


def _interior_word(literal: str) -> str | None:
    """The longest word of 4+ characters inside the literal that cannot be part of a longer word in the line."""
    best = None
    for match in re.finditer(r"\w+", literal):
        if match.start() == 0 or match.end() == len(literal) or len(match.group()) < 4:
            continue
        if best is None or len(match.group()) > len(best):
            best = match.group()
    return best


def _values(found: re.Match[str]) -> tuple[tuple[str, str], ...]:
    return tuple((name, " ".join(value.split())) for name, value in found.groupdict().items() if value)


LITERALS_CACHE = "explain-signature-literals.json"


def cached_literals(sources: list[str]) -> dict[str, tuple[str, ...] | None]:
    """required_literals of each pattern, kept in the kvdoctor cache between runs (parsing 100+ patterns costs a
    few tenths of a second at every start); without a cache directory they are computed each time."""
    import json
    import os

    from kvdoctor.base.cache_dir import default_cache_dir

    directory = default_cache_dir()
    path = directory / LITERALS_CACHE if directory is not None else None
    stored: dict[str, list[str] | None] = {}
    if path is not None:
        try:
            stored = json.loads(path.read_text()).get("literals", {})
        except (OSError, ValueError, AttributeError):
            stored = {}
    found = {source: (tuple(stored[source]) if stored[source] is not None else None) for source in sources
             if source in stored and isinstance(stored[source], (list, type(None)))}
    missing = [source for source in dict.fromkeys(sources) if source not in found]
    for source in missing:
        found[source] = required_literals(source)
    if missing and path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f"{path.name}.{os.getpid()}")
            temporary.write_text(json.dumps({"literals": {**stored, **{s: found[s] for s in missing}}}))
            os.replace(temporary, path)
        except OSError:
            pass  # a read-only cache only costs the parse next time
    return found


def required_literals(pattern: str) -> tuple[str, ...] | None:
    """Literal texts of which every match of the pattern contains at least one (its longest literal run, or
    one per branch of an alternation); None when there are none of 4+ characters or the pattern ignores case.
    Lines with none of them cannot match."""
    from re import _constants as c, _parser as parser

    try:
        tree = parser.parse(pattern)
    except re.error:
        return None
    if tree.state.flags & re.IGNORECASE:
        return None

    def longest(items) -> str:
        best, run = "", ""
        for op, arg in items:
            if op is c.LITERAL:
                run += chr(arg)
                continue
            if op is c.MAX_REPEAT and arg[0] == 1 and list(arg[2]) == [(c.IN, [(c.CATEGORY, c.CATEGORY_SPACE)])]:
                run += " "  # families.yaml writes a space as \s+; within one log line that is a space
                continue
            best, run = max(best, run, key=len), ""
            if op is c.SUBPATTERN:
                best = max(best, longest(arg[-1]), key=len)
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT) and arg[0] >= 1:
                best = max(best, longest(arg[2]), key=len)
        return max(best, run, key=len)

    def branches(items) -> tuple[str, ...] | None:
        for op, arg in items:
            if op is c.SUBPATTERN:
                found = branches(arg[-1])
                if found:
                    return found
            elif op is c.BRANCH:
                found = tuple(longest(branch) for branch in arg[1])
                if all(len(text) >= 4 for text in found):
                    return found
        return None

    best = longest(tree)
    if len(best) >= 4:
        return (best,)
    return branches(tree)
