"""Knowledge-graph corpora (KGQA): the graph of triples, each question's retrieval graph,
and the chains ReG reorganises retrieved triples into."""
