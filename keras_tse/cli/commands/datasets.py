"""`keras-tse datasets`: every data set of the registry, with its task, input and offline source."""

HELP = "every data set by name (keras_tse.data.list_datasets): task, input, where it comes from offline"


def add_arguments(parser):
    parser.add_argument("--task", choices=("images", "text"), help="only the image sets, or only the text sets")


def run(args):
    from keras_tse import data

    rows = [("name", "task", "input", "offline")]
    for name in data.list_datasets(args.task):
        spec = data.get_dataset(name)
        rows.append((name, spec.task + (" (own)" if spec.own else ""), spec.describe(), spec.offline))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    return 0
