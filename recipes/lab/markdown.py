"""Markdown tables, as the cards print them: a header row, the alignment row, one row a record."""


def table(header, rows, right=()):
    """The table of `header` (column titles) and `rows` (each a sequence of cell strings), the columns at the
    indexes `right` right-aligned (numbers), the others left."""
    align = ["---:" if i in right else "---" for i in range(len(header))]
    return "\n".join("| " + " | ".join(cells) + " |" if cells is not align else "|" + "|".join(align) + "|"
                     for cells in (header, align, *rows))  # fmt: skip
