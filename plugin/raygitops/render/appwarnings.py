"""Render's warnings for an app, each said once (pure).

An app of many RayClusters written from one template repeats its near misses: the same field a
shipped CRD schema does not know in every cluster, the same foreign annotation.  Each message
is one line, at the first place it was found (where the user looks), with how many RayClusters
carry it and where the next ones are: the cost of the warnings, to render and to read, grows
with what is found, not with the clusters it is found in.
"""

from __future__ import annotations

# places named after the first, in a message's count
SHOWN = 3


class AppWarnings:
    """Warnings by message, in the order first found, with their places ("path:line")."""

    def __init__(self) -> None:
        self._places: dict[str, list[str]] = {}  # message -> its first SHOWN places
        self._counts: dict[str, int] = {}  # message -> how many places

    def add(self, where: str, message: str) -> None:
        places = self._places.setdefault(message, [])
        if len(places) < SHOWN:
            places.append(where)
        self._counts[message] = self._counts.get(message, 0) + 1

    def lines(self) -> list[str]:
        """``path:line: message``, and for a message found in more than one RayCluster
        ``(in N RayClusters: path:line, ...)``, naming the first places and how many more."""
        out = []
        for message, places in self._places.items():
            count = self._counts[message]
            line = f"{places[0]}: {message}"
            if count > 1:
                named = ", ".join(places[:SHOWN]) + (f", and {count - SHOWN} more" if count > SHOWN else "")
                line += f" (in {count} RayClusters: {named})"
            out.append(line)
        return out
