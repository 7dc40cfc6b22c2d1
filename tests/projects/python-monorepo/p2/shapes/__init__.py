"""The second project of the monorepo fixture."""
