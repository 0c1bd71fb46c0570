NET = 1
