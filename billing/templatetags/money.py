"""``{{ amount|usd }}``: USD to the cent with thousands separators, '1,234.57'.

What ``floatformat:"2g"`` prints (half up, no '-0.00'), without its locale machinery: the
spend pages print a few hundred amounts, and floatformat took a quarter of their rendering.
"""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from django import template

from billing.metering import CENT

register = template.Library()


@register.filter
def usd(amount) -> str:
    """'' for None, '' or anything that is not a number."""
    if amount is None or amount == "":
        return ""
    try:
        cents = Decimal(str(amount)).quantize(CENT, rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError):
        return ""
    return f"{cents if cents else abs(cents):,.2f}"
