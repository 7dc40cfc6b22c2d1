/* Stand-in for the macOS SDK's header (see ../../README.md); ring builds with NDEBUG. */
#define assert(e) ((void)0)
