"""Money, labels, articles and plurals in words: the one place pages, notices and emails get
them from, so "$5,000.00" never stands beside "$5000.00", and no page says "a A100",
"1 GPUs" or "pending_approval".
"""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from fractions import Fraction

# Letters whose spoken name starts with a vowel sound: "an H100", "an A10", "an MI300X".
_VOWEL_SOUND_LETTERS = frozenset("AEFHILMNORSX")
_VOWELS = frozenset("aeiou")


def duration_words(minutes: float) -> str:
    """A duration in words as the owner would say it: "4 hours", "24 minutes", "1 hour 30
    minutes", "30 seconds". ``minutes`` may be fractional (scaled demo timings)."""
    seconds = round(minutes * 60)
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    hours, mins = divmod(round(seconds / 60), 60)
    parts = [f"{hours} hour{'s' if hours != 1 else ''}"] if hours else []
    if mins:
        parts.append(f"{mins} minute{'s' if mins != 1 else ''}")
    return " ".join(parts)


def usd(amount: object, places: int = 2) -> str:
    """``amount`` (Decimal, int, float or numeric str) in USD as '$5,000.00'.

    ``places`` decimals, rounded half up (per-hour prices may want 3 or 4). A negative amount
    reads '-$5.00'; no '-$0.00'. Returns '' for None, '' or anything that is not a number.
    """
    if amount is None or amount == "":
        return ""
    try:
        exponent = Decimal(1).scaleb(-int(places))
        value = Decimal(str(amount)).quantize(exponent, rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError, TypeError):
        return ""
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.{int(places)}f}"


# The portal's one rule for money (README "Money and numbers"): a rate per hour (a price, a
# burn rate, a price ceiling) has four decimals, as Azure Retail Prices give them
# ("$3.6730/hour"); every other amount (spend, cost, budget, a monthly or daily figure) has two.
HOURLY_PLACES = 4


def usd_hourly(amount: object) -> str:
    """A rate per hour in USD to HOURLY_PLACES decimals, '$3.6730'; the caller writes the
    unit ('/hour', ' per hour'). '' for None or anything that is not a number."""
    return usd(amount, HOURLY_PLACES)


def sentence(text: object) -> str:
    """``text`` ending in exactly one full stop: a reason that already ends with one (e.g.
    "... to 08:54 UTC.") is not given a second ("08:54 UTC.."). '' stays ''."""
    body = str(text or "").rstrip().rstrip(".").rstrip()
    return f"{body}." if body else ""


def article(word: object) -> str:
    """'a' or 'an' for ``word`` as it is spoken: 'an A100', 'a T4', 'an hour', 'a MIG slice'
    is 'an MIG slice' read letter by letter, so acronyms (all capitals or a capital followed by
    a digit) go by their first letter's name."""
    text = str(word).strip()
    if not text:
        return "a"
    head = text.split()[0]
    spelled = head.isupper() or (len(head) > 1 and head[0].isalpha() and head[1].isdigit())
    if spelled:
        return "an" if head[0].upper() in _VOWEL_SOUND_LETTERS else "a"
    if head.lower().startswith(("hour", "honest")):
        return "an"
    if head.lower().startswith(("uni", "use", "usu", "one")):
        return "a"
    return "an" if head[0].lower() in _VOWELS else "a"


def with_article(word: object) -> str:
    """'an A100', 'a T4'."""
    return f"{article(word)} {word}"


def counted(number: object, noun: str, plural: str = "") -> str:
    """'1 GPU', '2 GPUs', '0 GPUs', '3/7 GPU' (a fraction of one is singular).

    ``plural`` defaults to ``noun`` + 's'. ``number`` may be an int, Decimal, Fraction or str.
    """
    try:
        amount = Fraction(str(number))
    except (ValueError, ZeroDivisionError):
        return f"{number} {plural or noun + 's'}"
    word = noun if 0 < amount <= 1 else (plural or noun + "s")
    return f"{_number(number)} {word}"


def times(number: object, model: str, noun: str = "GPU") -> str:
    """'1 × A100 GPU', '2 × A100 GPUs': ``number`` of ``model`` ``noun``s, plural by count."""
    word = noun if str(number) == "1" else f"{noun}s"
    return f"{number} × {model} {word}".replace("  ", " ")


def _number(number: object) -> str:
    if isinstance(number, Fraction):
        whole, part = divmod(number, 1)
        if not part:
            return str(whole)
        return f"{whole} {part}" if whole else str(part)
    return str(number)


def label(value: object) -> str:
    """The word label of a value the portal stores: a workspace status or kind, a decision, a
    node pool status, a team role; an audit action such as 'quota_request.approved' reads
    'Quota request approved'. Other values come back as given (GPU models such as 'A100' are
    already their own label)."""
    if value is None:
        return ""
    text = str(value)
    known = _labels().get(text) or kind_label(text)
    if known:
        return known
    if text.islower() and ("_" in text or "." in text):
        words = text.replace(".", " ").replace("_", " ").split()
        return " ".join(words).capitalize()
    return text


def stored_label(value: str) -> str:
    """The label of a value the portal stores as a choice (a status, role, decision),
    else ``value`` unchanged: for free text such as a username or an e-mail address."""
    return _labels().get(value) or kind_label(value) or value


def kind_label(value: str) -> str | None:
    """A registered workspace kind's label ("GPU VM"), else None. Read from the registry on
    each call: a kind may be registered after the first label was asked for."""
    # Imported late, as _collect_labels: workspaces.backends imports this module.
    from workspaces.backends import registry

    return registry.kind_label(value)


def _labels() -> dict[str, str]:
    global _LABELS
    if _LABELS is None:
        _LABELS = _collect_labels()
    return _LABELS


_LABELS: dict[str, str] | None = None


def _collect_labels() -> dict[str, str]:
    # Imported late: this module is imported by models' modules and template tags alike.
    from clusters.models import PoolStatus
    from teams.models import Decision, Role
    from workspaces.states import STYLE

    found: dict[str, str] = {}
    for choices in (PoolStatus, Decision, Role):
        found.update({str(value): str(text) for value, text in choices.choices})
    found.update({str(status): style.label for status, style in STYLE.items()})
    return found
