"""Templates: sandboxed rendering, its limits, probe conversations, family detection, walls, offline conformance and the rejection matrix."""
