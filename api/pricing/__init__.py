"""What GPU time and energy cost: the operator's price list (issue 60), and how a GPU-second or a joule is priced."""

from mfumon.api.pricing.prices import NO_PRICES, PriceList, known_cost

__all__ = ["NO_PRICES", "PriceList", "known_cost"]
