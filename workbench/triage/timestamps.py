"""When a log line was written, as far as the line itself says.

The logs of one failure carry four clocks: CANN's plog and message codes (`2025-07-08-19:23:04.799.485`,
year to microsecond), torch_npu (`2025-06-03-14:54:23`), vLLM's logger (`09-04 09:50:12`, no year) and
torch's c10 log (`[E324 13:00:25.428029551`: month and day run together, no year). `LogTime` keeps what
was written and whether the year was; `resolve` gives every time the same year before events of several
files are compared, taking the year from the lines that wrote one:

    LogTime(datetime(1900, 3, 24, 13, 0, 25, 428029), has_year=False).resolve(2025)
      -> 2025-03-24 13:00:25.428029
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

NO_YEAR = 1900  # placeholder year of a time written without one (1900 is not a leap year: see _date)


@dataclass(frozen=True, order=True)
class LogTime:
    moment: dt.datetime  # naive local time of the machine that wrote the log
    has_year: bool

    def resolve(self, year: int) -> dt.datetime:
        """This time in `year` when the line gave none (29 February of a leap year stays representable)."""
        if self.has_year:
            return self.moment
        try:
            return self.moment.replace(year=year)
        except ValueError:
            return self.moment.replace(year=year, day=28)

    def iso(self) -> str:
        """'2025-09-04T09:50:12.024496', or '09-04T09:50:12' without a year (never a made-up one)."""
        text = self.moment.isoformat()
        return text if self.has_year else text[5:]


def _date(year: int | None, month: int, day: int) -> dt.date | None:
    try:
        # Feb 29 without a year: keep it in a leap placeholder so the date survives until resolve().
        return dt.date(year or (NO_YEAR if (month, day) != (2, 29) else 1904), month, day)
    except ValueError:
        return None


def make_time(
    year: int | None, month: int, day: int, hms: str, fraction: str = "", fraction_digits: int | None = None
) -> LogTime | None:
    """A LogTime from parts as a line wrote them; None when they do not form a date and time.

    `fraction` is the part after the seconds ('428029551' nanoseconds, '799.485' ms.µs); it is read as
    a decimal fraction of a second, so any number of digits works.
    """
    date = _date(year, month, day)
    if date is None:
        return None
    try:
        hour, minute, second = (int(p) for p in hms.split(":"))
        digits = fraction.replace(".", "")[: fraction_digits or 6].ljust(6, "0")
        moment = dt.datetime(date.year, month, day, hour, minute, second, int(digits or 0))
    except ValueError:
        return None
    return LogTime(moment, has_year=year is not None)
