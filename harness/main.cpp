#include "cli.h"

int main(int argc, char** argv) { return kvbench::run_cli(argc, argv); }
