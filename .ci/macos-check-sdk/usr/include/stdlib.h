/* Stand-in for the macOS SDK's header (see ../../README.md). */
void abort(void);
