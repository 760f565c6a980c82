<?php
// PHP: arrays and strings through the Zend allocator, serialisation, a shell child, php://stdout.
$a = [];
for ($i = 0; $i < 300000; $i++) { $a[] = str_repeat("x", $i % 100); if (count($a) > 1000) $a = []; }
echo md5(serialize(range(1, 1000))), "\n";
echo shell_exec("echo child");
fwrite(fopen("php://stdout", "w"), "done\n");
