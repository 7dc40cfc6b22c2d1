"""The first project of the monorepo fixture."""
