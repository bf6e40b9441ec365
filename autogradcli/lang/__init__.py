"""The expression and value languages: vocabulary, parser, tree, shapes, values."""
