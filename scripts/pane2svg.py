#!/usr/bin/env python3
"""pane2svg.py < capture > out.svg: turns `tmux capture-pane -p -e` output (text with SGR
escape sequences) into an SVG of monospace cells, for the README's screenshots.

Understands what tmux emits: reset, bold, dim, reverse, the 8/16 colours, 256 colours
and 24-bit colours, default foreground/background. Other sequences are dropped.
"""
import html
import re
import sys

BASE = ["#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5"]
BRIGHT = ["#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"]
FG, BG = "#d4d4d4", "#1e1e1e"
CW, CH = 8.4, 17  # cell width and height, px


def xterm256(n):
    if n < 8:
        return BASE[n]
    if n < 16:
        return BRIGHT[n - 8]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (v, v, v)


def apply(params, st):
    p = [int(x) if x else 0 for x in params.split(";")] if params else [0]
    i = 0
    while i < len(p):
        c = p[i]
        if c == 0:
            st.update(fg=None, bg=None, bold=False, dim=False, rev=False)
        elif c == 1:
            st["bold"] = True
        elif c == 2:
            st["dim"] = True
        elif c == 7:
            st["rev"] = True
        elif c == 22:
            st["bold"] = st["dim"] = False
        elif c == 27:
            st["rev"] = False
        elif 30 <= c <= 37:
            st["fg"] = BASE[c - 30]
        elif 90 <= c <= 97:
            st["fg"] = BRIGHT[c - 90]
        elif 40 <= c <= 47:
            st["bg"] = BASE[c - 40]
        elif 100 <= c <= 107:
            st["bg"] = BRIGHT[c - 100]
        elif c == 39:
            st["fg"] = None
        elif c == 49:
            st["bg"] = None
        elif c in (38, 48) and i + 1 < len(p):
            key = "fg" if c == 38 else "bg"
            if p[i + 1] == 5 and i + 2 < len(p):
                st[key] = xterm256(p[i + 2])
                i += 2
            elif p[i + 1] == 2 and i + 4 < len(p):
                st[key] = "#%02x%02x%02x" % tuple(p[i + 2 : i + 5])
                i += 4
        i += 1


def main():
    rows = []
    st = dict(fg=None, bg=None, bold=False, dim=False, rev=False)
    for line in sys.stdin.read().rstrip("\n").split("\n"):
        cells = []
        for part in re.split(r"(\x1b\[[0-9;]*[A-Za-z])", line):
            if part.startswith("\x1b["):
                if part.endswith("m"):
                    apply(part[2:-1], st)
                continue
            for ch in part:
                cells.append((ch, dict(st)))
        rows.append(cells)
    width = max((len(r) for r in rows), default=0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width * CW:.0f}" height="{len(rows) * CH}" '
        f'font-family="DejaVu Sans Mono, monospace" font-size="14">',
        f'<rect width="100%" height="100%" fill="{BG}"/>',
    ]
    for y, cells in enumerate(rows):
        x = 0
        while x < len(cells):
            # Runs of cells with one style become one <text> (and one <rect> for a background).
            ch, s = cells[x]
            end = x
            while end < len(cells) and cells[end][1] == s:
                end += 1
            text = "".join(c for c, _ in cells[x:end])
            fg, bg = s["fg"] or FG, s["bg"]
            if s["rev"]:
                fg, bg = (s["bg"] or BG), (s["fg"] or FG)
            if bg:
                out.append(
                    f'<rect x="{x * CW:.1f}" y="{y * CH}" width="{(end - x) * CW:.1f}" height="{CH}" fill="{bg}"/>'
                )
            if text.strip():
                attrs = f'fill="{fg}"'
                if s["bold"]:
                    attrs += ' font-weight="bold"'
                if s["dim"]:
                    attrs += ' fill-opacity="0.6"'
                out.append(
                    f'<text x="{x * CW:.1f}" y="{y * CH + 13}" {attrs} xml:space="preserve" '
                    f'textLength="{(end - x) * CW:.1f}" lengthAdjust="spacingAndGlyphs">{html.escape(text)}</text>'
                )
            x = end
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
