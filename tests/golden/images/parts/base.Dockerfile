FROM chexstack-test/base:1 AS devel
