;;; SBCL: trees built on the main thread, then on three threads, so that the generational
;;; collector stops the other threads (SIGUSR2) while they allocate or wait; a type error caught;
;;; a child process. The collector reads each stopped thread's stack pointer from the signal
;;; context and needs it on that thread's stack.
(defun make-tree (d) (if (= d 0) nil (cons (make-tree (1- d)) (make-tree (1- d)))))
(defun count-tree (x) (if (null x) 1 (+ (count-tree (car x)) (count-tree (cdr x)))))
(let ((s 0)) (dotimes (i 40) (incf s (count-tree (make-tree 16)))) (format t "~a~%" s))
(let ((threads (loop for i below 3
                     collect (sb-thread:make-thread
                              (lambda () (let ((s 0)) (dotimes (k 10) (incf s (count-tree (make-tree 15)))) s))))))
  (format t "~a~%" (mapcar #'sb-thread:join-thread threads)))
(handler-case (car (the list (read-from-string "5"))) (error (e) (format t "caught ~a~%" (type-of e))))
(format t "~a" (with-output-to-string (s) (sb-ext:run-program "/bin/echo" '("child") :output s)))
