"""The duplicate URL eliminator (Mercator §3.2): canonical URLs, fingerprints, seen sets."""
