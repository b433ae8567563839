"""Engines: speculative decoding run by the engines users deploy, behind one small protocol (`base.Engine`)."""
