"""RAS's Graph-LLM (Jiang et al., App. C.2): a frozen causal LM reading one graph soft token.

model (the model, ``load_cached_graph_llm``), encoder (subgraphs → the soft token),
train (LoRA training), state (what a resumed training reads back).
"""
