"""From what was measured to the result: the document, the record, cells, the breakdown."""
