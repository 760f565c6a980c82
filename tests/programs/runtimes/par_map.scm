;; Guile: par-map over four threads building trees, then a collection. Guile's collector (Boehm
;; GC) stops the other threads with a signal and scans each from the stack pointer its handler
;; saw to the thread's stack base.
(use-modules (ice-9 threads))
(define (tree d) (if (= d 0) '() (cons (tree (- d 1)) (tree (- d 1)))))
(define (count t) (if (null? t) 1 (+ (count (car t)) (count (cdr t)))))
(display (par-map (lambda (d) (let loop ((i 0) (s 0)) (if (= i 6) s (loop (+ i 1) (+ s (count (tree d))))))) '(15 15 15 15)))
(newline)
(gc)
(display "collected") (newline)
