;; Chez Scheme: recursion and allocation through its own collector.
(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))
(display (fib 27)) (newline)
(display (let loop ((i 0) (acc '()))
           (if (= i 200000) (length acc) (loop (+ i 1) (cons (make-vector 8 i) (if (> (length acc) 1000) '() acc))))))
(newline)
